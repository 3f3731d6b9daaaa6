package config_test

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/test/testbed"
)

// dockerfile is the repository's Dockerfile as instructions: the first word
// of each (upper-cased) and the rest of its line.
func dockerfile(t *testing.T, root string) [][2]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, rest, _ := strings.Cut(line, " ")
		out = append(out, [2]string{strings.ToUpper(op), strings.TrimSpace(rest)})
	}
	return out
}

// The image cannot be built here (no container engine), so its parts are
// checked one by one: the Dockerfile's own build line, run as it stands,
// makes a static binary (the final stage has no libc) with the time zone
// database in it (nor zoneinfo); the binary knows every subcommand the
// manifests and the trigger pods run; and the image's user is numeric,
// not root, and the one the trigger pods ask for.
func TestImage(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var build, user, entrypoint, final string
	for _, in := range dockerfile(t, root) {
		switch in[0] {
		case "FROM":
			final = in[1]
		case "RUN":
			if strings.Contains(in[1], "go build") {
				build = in[1]
			}
		case "USER":
			user = in[1]
		case "ENTRYPOINT":
			entrypoint = in[1]
		}
	}
	if !strings.HasPrefix(final, "gcr.io/distroless/static") {
		t.Errorf("final stage %q: the checks below assume distroless/static (no libc, no shell)", final)
	}
	if entrypoint != `["/sless"]` || !strings.Contains(build, "-o /out/sless ") {
		t.Fatalf("ENTRYPOINT %s, build line %q: want the binary at /sless", entrypoint, build)
	}
	uid, gid, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 || n != kube.CallerUser {
		t.Errorf("USER %q: want numeric, not root, and %d (the trigger pods' runAsUser)", user, kube.CallerUser)
	}
	if _, err := strconv.Atoi(gid); err != nil {
		t.Errorf("USER %q: want a numeric group", user)
	}

	bin := filepath.Join(t.TempDir(), "sless")
	cmd := exec.Command("sh", "-c", strings.NewReplacer("/out/sless", bin, "${VERSION}", "v0.0.0-imagetest", "${COMMIT}", "0123abc").Replace(build))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary needs a dynamic loader; the final stage has none")
		}
	}
	f.Close()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || !strings.Contains(settings["-tags"], "timetzdata") {
		t.Errorf("build settings %v: want CGO_ENABLED=0 and -tags timetzdata", settings)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "sless v0.0.0-imagetest (commit 0123abc, ") {
		t.Errorf("sless version: %q, %v", out, err)
	}
	help, _ := exec.Command(bin, "help").CombinedOutput()
	known := map[string]bool{}
	for _, line := range strings.Split(string(help), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(line, "  ") {
			known[f[0]] = true
		}
	}
	// The trigger controller runs `invoke` (cron) and `consume` (queue).
	want := []string{"invoke", "consume"}
	for _, m := range []string{"manager/controller.yaml", "api/api.yaml"} {
		for _, d := range deployments(t, filepath.Join(root, "config", m)) {
			for _, c := range d.Spec.Template.Spec.Containers {
				if len(c.Command) > 0 || len(c.Args) == 0 {
					t.Errorf("%s container %s: command %v args %v; want the subcommand as args, the image's entrypoint kept", m, c.Name, c.Command, c.Args)
					continue
				}
				want = append(want, c.Args[0])
			}
		}
	}
	for _, sub := range want {
		if !known[sub] {
			t.Errorf("the image's sless has no subcommand %q; it has %v", sub, known)
		}
	}
}

// deployments are the Deployments in a multi-document manifest.
func deployments(t *testing.T, path string) []appsv1.Deployment {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []appsv1.Deployment
	for _, doc := range strings.Split(string(b), "\n---") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d.Kind == "Deployment" {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no Deployment", path)
	}
	return out
}
