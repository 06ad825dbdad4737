package isolate

// OOMKills counts kernels the memory limit killed since New (always 0
// where no memory controller reports OOM kills).
func (i *Isolator) OOMKills() int64 { return i.oomKills.Load() }
