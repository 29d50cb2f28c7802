package catalog_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/notify/catalog"
)

func TestParseFile(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	yamlDoc := `
plugin_dir: /var/lib/veritrail/plugins
plugins:
  - name: pager
    command: pager
    sha256: ` + sum + `
    args: [--quiet]
    settings: {token: t0ken, allow_private: "true"}
builtins:
  email: {host: smtp.example.com, port: "587", from: "Veritrail <v@example.com>"}
`
	want := catalog.File{
		PluginDir: "/var/lib/veritrail/plugins",
		Plugins: []catalog.Entry{{Name: "pager", Command: "pager", SHA256: sum, Args: []string{"--quiet"},
			Settings: map[string]string{"token": "t0ken", "allow_private": "true"}}},
		Builtins: map[string]map[string]string{"email": {"host": "smtp.example.com", "port": "587", "from": "Veritrail <v@example.com>"}},
	}
	for name, doc := range map[string]string{
		"yaml": yamlDoc,
		"json": `{"plugin_dir": "/var/lib/veritrail/plugins", "plugins": [{"name": "pager", "command": "pager", "sha256": "` + sum +
			`", "args": ["--quiet"], "settings": {"token": "t0ken", "allow_private": "true"}}], "builtins": {"email": ` +
			`{"host": "smtp.example.com", "port": "587", "from": "Veritrail <v@example.com>"}}}`,
	} {
		got, err := catalog.ParseFile([]byte(doc))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v\nwant %+v", name, got, err, want)
		}
	}
	if got, err := catalog.ParseFile(nil); err != nil || !reflect.DeepEqual(got, catalog.File{}) {
		t.Errorf("empty file: %+v, %v", got, err)
	}
	if _, err := catalog.ParseFile([]byte("plugins:\n  - name: pager\n    sha: abc\n")); err == nil || !strings.Contains(err.Error(), "sha") {
		t.Errorf("a misspelt key was accepted: %v", err)
	}
}
