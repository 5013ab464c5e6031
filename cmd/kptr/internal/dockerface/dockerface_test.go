package dockerface

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/cmd/kptr/internal/dockerface/dockerfacetest"
)

// The exact command lines kustomize and kpt send (testdata) parse into what
// they ask for.
func TestParseCallers(t *testing.T) {
	cases := []struct {
		file string
		want Command
	}{
		{"kustomize-v5.8-run.args", Command{Kind: KindRun, Run: Run{
			Image: "example.com/fn/set-labels:v1", Interactive: true, Remove: true, NoNewPr: true,
			Attach: []string{"STDIN", "STDOUT", "STDERR"}, Network: "none", User: "nobody",
			Env: []Env{{"LOG_TO_STDERR", "true", true}, {"STRUCTURED_RESULTS", "true", true}},
		}}},
		{"kyaml-old-run.args", Command{Kind: KindRun, Run: Run{
			Image: "example.com/fn/set-labels:v1", Interactive: true, Remove: true, NoNewPr: true,
			Attach: []string{"STDIN", "STDOUT", "STDERR"}, Network: "none", User: "nobody",
			Mounts: []Mount{
				{Type: "bind", Source: "/src/data", Target: "/data", ReadOnly: true},
				{Type: "tmpfs", Target: "/scratch", ReadOnly: true},
			},
			Env: []Env{{Name: "HOME"}, {Name: "REDIS_PASSWORD"}, {Name: "LOG_TO_STDERR"}, {Name: "STRUCTURED_RESULTS"}},
		}}},
		{"kpt-beta56-run.args", Command{Kind: KindRun, Run: Run{
			Image: "example.com/fn:v1", Interactive: true, Remove: true, NoNewPr: true,
			Network: "none", User: "0:0", Pull: "missing",
			Mounts: []Mount{{Type: "bind", Source: "/tmp", Target: "/x", ReadOnly: true}},
			Env:    []Env{{"FOO", "bar", true}, {Name: "HOME"}},
		}}},
		{"kpt-beta56-network.args", Command{Kind: KindRun, Run: Run{
			Image: "gcr.io/kpt-fn/fn:v1", Interactive: true, Remove: true, NoNewPr: true,
			Network: "host", User: "nobody", Pull: "missing",
		}}},
		{"kpt-beta56-version.args", Command{Kind: KindVersion, Format: "{{.Client.Version}}"}},
		{"kpt-beta56-podman-version.args", Command{Kind: KindVersion}},
	}
	for _, c := range cases {
		got, err := Parse(dockerfacetest.Args(c.file, ""))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.file, got, c.want)
		}
	}
}

func TestParseOthers(t *testing.T) {
	cases := []struct {
		args []string
		want Command
	}{
		{[]string{"run", "--rm", "-i", "--network=host", "-u", "65534:65534", "-eA=1", "--env", "B", "img", "env", "-x"},
			Command{Kind: KindRun, Run: Run{Image: "img", Args: []string{"env", "-x"}, Remove: true, Interactive: true,
				Network: "host", User: "65534:65534", Env: []Env{{"A", "1", true}, {Name: "B"}}}}},
		{[]string{"container", "run", "--pull=never", "--", "img"}, Command{Kind: KindRun, Run: Run{Image: "img", Pull: "never"}}},
		{[]string{"run", "--mount", "type=volume,target=/v,rw=true", "img"},
			Command{Kind: KindRun, Run: Run{Image: "img", Mounts: []Mount{{Type: "volume", Target: "/v", ReadWrite: true}}}}},
		{[]string{"run", "--mount", "type=bind,source=/a,destination=/b,readonly=false", "img"},
			Command{Kind: KindRun, Run: Run{Image: "img", Mounts: []Mount{{Type: "bind", Source: "/a", Target: "/b", ReadWrite: true}}}}},
		{[]string{"--version"}, Command{Kind: KindVersion, Format: shortVersion}},
		{[]string{"--help"}, Command{Kind: KindHelp}},
		{[]string{"pull", "img:v1"}, Command{Kind: KindPull, Images: []string{"img:v1"}}},
		{[]string{"image", "inspect", "a", "b"}, Command{Kind: KindInspect, Images: []string{"a", "b"}}},
		{[]string{"inspect", "--type", "image", "-f", "{{.Id}}", "a"}, Command{Kind: KindInspect, Images: []string{"a"}, Format: "{{.Id}}"}},
		{[]string{"tag", "a", "b"}, Command{Kind: KindTag, Images: []string{"a", "b"}}},
		{[]string{"rmi", "-f", "a"}, Command{Kind: KindRmi, Images: []string{"a"}, Force: true}},
		{[]string{"image", "rm", "a"}, Command{Kind: KindRmi, Images: []string{"a"}}},
		{[]string{"images", "-q"}, Command{Kind: KindImages, Quiet: true}},
		{[]string{"image", "ls", "repo"}, Command{Kind: KindImages, Images: []string{"repo"}}},
	}
	for _, c := range cases {
		got, err := Parse(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", c.args, got, c.want)
		}
	}
}

// Every flag or subcommand the face does not know is refused with one line
// naming it, and docker's exit code 125: never dropped.
func TestParseRefusals(t *testing.T) {
	kustomize := dockerfacetest.Args("kustomize-v5.8-run.args", "")
	withFlag := func(flag ...string) []string {
		return append(append(append([]string{}, kustomize[:len(kustomize)-1]...), flag...), kustomize[len(kustomize)-1])
	}
	cases := []struct {
		args []string
		want string
	}{
		{withFlag("--privileged"), "the flag --privileged of `run` is not supported"},
		{withFlag("-v", "/:/host"), "the flag -v of `run` is not supported"},
		{withFlag("-it"), "the flag -it of `run` is not supported"},
		{withFlag("--cap-add=SYS_ADMIN"), "the flag --cap-add of `run` is not supported"},
		{withFlag("--entrypoint", "/bin/sh"), "the flag --entrypoint of `run` is not supported"},
		{withFlag("--network", "bridge"), "run --network bridge is not supported"},
		{withFlag("--security-opt", "seccomp=unconfined"), "run --security-opt seccomp=unconfined is not supported"},
		{withFlag("--mount", "type=bind,source=/a,target=/b,bind-propagation=shared"), `the --mount option "bind-propagation" is not supported`},
		{withFlag("--mount", "type=npipe,source=/a,target=/b"), "--mount type=npipe is not supported"},
		{withFlag("--mount", "type=bind,target=/b"), "a bind mount needs a source"},
		{withFlag("--mount", "type=bind,source=/a,target=b"), "target must be an absolute path"},
		{withFlag("--pull", "sometimes"), `--pull "sometimes": want never, always or missing`},
		{[]string{"run", "--rm", "-i"}, "run: no image given"},
		{[]string{"build", "."}, "`build` is not supported"},
		{[]string{"exec", "c", "sh"}, "`exec` is not supported"},
		{[]string{"--host", "tcp://x", "run", "img"}, "the global flag --host is not supported"},
		{[]string{"image", "prune"}, "`image prune` is not supported"},
		{[]string{"images", "--all"}, "the flag --all of `images` is not supported"},
		{[]string{"tag", "a"}, "`tag` takes 2 argument(s), got 1"},
		{[]string{}, "no command given"},
	}
	for _, c := range cases {
		_, err := Parse(c.args)
		if err == nil {
			t.Errorf("%q: accepted, want %q", c.args, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %q, want one line with %q", c.args, err, c.want)
		}
		if e, ok := err.(*Error); !ok || e.ExitCode() != 125 {
			t.Errorf("%q: %T, want *Error with exit 125", c.args, err)
		}
	}
}
