package overlay

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Write writes mutant beside dir's other files under file's base name and
// the -overlay JSON that replaces file with it; it returns the JSON's path.
func Write(dir, file string, mutant []byte) (string, error) {
	repl := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(repl, mutant, 0o600); err != nil {
		return "", err
	}
	return WriteJSON(dir, map[string]string{file: repl})
}

// WriteJSON writes dir/overlay.json, the -overlay file that replaces each
// key of replace (an absolute path) with its value; it returns its path.
func WriteJSON(dir string, replace map[string]string) (string, error) {
	b, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, b, 0o600)
}

// RepoRoot is the directory of the main module's go.mod.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the kernpool module")
	}
	return filepath.Dir(mod), nil
}
