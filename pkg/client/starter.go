package client

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

// WriteStarter makes dir with lang's hello-world function named name: the
// handler, a sless.yaml naming it, a README and an empty .slessignore. dir
// must not exist or be empty. lang is a key of runtimes.Starters.
func WriteStarter(dir, lang, name string) (runtimes.Starter, error) {
	t, ok := runtimes.Starters[lang]
	if !ok {
		return t, fmt.Errorf("no starter for %q", lang)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return t, fmt.Errorf("%s exists and is not empty: pick another NAME or --dir", dir)
	}
	files := map[string]string{
		source.ManifestFile: fmt.Sprintf("# sless deploy reads this file; sless.yaml and .slessignore are not uploaded.\nname: %s\nruntime: %s\nentrypoint: %s\n# memoryMB: 128\n# timeoutSeconds: 30\n# env:\n#   GREETING: hello\n# secretEnv:                 # NAME: SECRET/KEY, made with sless secret create\n#   DB_PASSWORD: db/password\n",
			name, t.Runtime, t.Entrypoint),
		"README.md": fmt.Sprintf("# %s\n\nA sless function (%s, entrypoint `%s`).\n\nDeploy it: `sless deploy %s`, then call it: `sless invoke %s -d '{\"name\": \"Ada\"}'`.\n",
			name, t.Runtime, t.Entrypoint, dir, name),
		source.IgnoreFile: "# Paths sless deploy leaves out of the upload, one pattern a line (as .gitignore, without negation).\n",
	}
	for f, body := range t.Files {
		files[f] = body
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return t, err
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			return t, err
		}
	}
	return t, nil
}
