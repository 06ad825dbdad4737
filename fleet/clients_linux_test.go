package fleet_test

import (
	oexec "os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// pyClientScript drives the Python client (sync and asyncio) against
// the URL and token it is given: a cell streams its stdout, the next
// sees the variable, a scoped token is refused another owner.
const pyClientScript = `
import asyncio, sys
from kernpool_client import Client, AsyncClient
url, token = sys.argv[1], sys.argv[2]
c = Client(url=url, token=token)
out = []
r = c.execute("x = 6 * 7\nprint(x)", owner="acme/py", on_stdout=out.append)
assert r.status == "success" and "".join(out) == "42\n", (r, out)
assert c.execute("print(x + 1)", owner="acme/py").output == "43\n"
try:
    c.execute("1", owner="bob")
    raise SystemExit("bob was not refused")
except Exception as e:
    assert getattr(e, "code", "") == "forbidden", e
async def main():
    a = AsyncClient(url=url, token=token)
    r = await a.execute("print(x + 2)", owner="acme/py")
    assert r.output == "44\n", r
asyncio.run(main())
print("ok")
`

// TestPythonClientThroughRouter: the Python client takes the router's
// URL and a token, and nothing else changes for it.
func TestPythonClientThroughRouter(t *testing.T) {
	testenv.RequirePython(t)
	f := newFleet(t)
	f.node("a")
	f.node("b")
	f.waitNodes(2)
	url := f.router()
	_, here, _, _ := runtime.Caller(0)
	cmd := oexec.Command(testenv.Python, "-c", pyClientScript, url, acmeToken)
	cmd.Env = append(cmd.Environ(), "PYTHONPATH="+filepath.Join(filepath.Dir(here), "..", "clients", "python"))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python client through the router: %v\n%s", err, out)
	}
}
