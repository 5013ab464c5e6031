// Package dockerface reads the command lines that kustomize (kyaml's
// container filter) and kpt (its container runtime, KPT_FN_RUNTIME=docker,
// podman or nerdctl) hand to a container CLI, and turns them into a plain
// description of what was asked: a Command. It decides nothing about where
// or how a function runs, and reads no file and no environment: kptr's
// command (cmd/kptr, docker.go) applies the operator's policy to a Command
// and runs it through the chain every kptr command uses.
//
// Only the words those callers use are understood. Any other subcommand or
// flag is an error naming it (docker's exit code for its own failures, 125),
// never a silent ignore: a flag kptr would drop could change what the
// caller believes the function may do.
package dockerface

import (
	"errors"
	"fmt"
	"strings"
)

// ExitUsage is docker's exit code for a command line it cannot run (the
// CLI's or the daemon's failure, not the container's): 125.
const ExitUsage = 125

// Kinds of Command.
const (
	KindRun     = "run"
	KindVersion = "version"
	KindPull    = "pull"
	KindInspect = "inspect" // docker inspect, docker image inspect
	KindTag     = "tag"
	KindRmi     = "rmi"    // docker rmi, docker image rm
	KindImages  = "images" // docker images, docker image ls
	KindHelp    = "help"   // --help, -h, help: what the face takes
)

// Command is one parsed command line.
type Command struct {
	Kind string
	// Run is the container to run (KindRun).
	Run Run
	// Images are the images named (pull, inspect, rmi; tag: source, target).
	Images []string
	// Format is a Go template given with --format (version, inspect, images).
	Format string
	// Quiet is images -q: only the image IDs.
	Quiet bool
	// Force is rmi -f (accepted: a name is forgotten either way).
	Force bool
}

// Run is docker run's arguments.
type Run struct {
	Image string
	// Args replace the image's Cmd, as in docker run IMAGE ARG...
	Args []string
	// Interactive is -i: the caller's stdin is the container's.
	Interactive bool
	// Attach are the streams of -a (STDIN, STDOUT, STDERR), as given.
	Attach []string
	// Network is none, host or "" (not given).
	Network string
	// User is --user as given (NAME, UID, NAME:GROUP, UID:GID), "" if none.
	User string
	// Pull is --pull: never, always, missing, or "" (not given).
	Pull    string
	Mounts  []Mount
	Env     []Env
	Remove  bool // --rm (every kptr run is removed)
	NoNewPr bool // --security-opt=no-new-privileges (kptr always sets it)
}

// Mount is one --mount.
type Mount struct {
	Type   string // bind, volume or tmpfs
	Source string // host path (bind), volume name ("" anonymous), "" (tmpfs)
	Target string
	// ReadOnly is what the caller wrote: readonly, ro, a ":ro" suffix of
	// the target (kyaml's older form), or neither rw=true nor
	// readonly=false. ReadWrite is rw=true or readonly=false.
	ReadOnly, ReadWrite bool
}

// Env is one -e: NAME=VALUE (HasValue) or NAME alone, which docker takes
// from the caller's environment.
type Env struct {
	Name, Value string
	HasValue    bool
}

// Error is a command line the face does not accept.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// ExitCode is docker's for a command it cannot run.
func (e *Error) ExitCode() int { return ExitUsage }

func errorf(format string, a ...any) error { return &Error{fmt.Sprintf(format, a...)} }

// unsupported names what was refused and what the face does accept.
func unsupported(what string, why ...string) error {
	if len(why) > 0 {
		return errorf("%s is not supported by kptr's docker face: %s", what, why[0])
	}
	return errorf("%s is not supported by kptr's docker face (it runs KRM functions: run, version, pull, image inspect, tag, rmi, images)", what)
}

// Parse reads a command line without the program name (docker's argv[1:]).
func Parse(args []string) (Command, error) {
	if len(args) == 0 {
		return Command{}, errorf("no command given (kptr's docker face takes run, version, pull, image inspect, tag, rmi, images)")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "--help", "-h", "help":
		return Command{Kind: KindHelp}, nil
	case "--version", "-v":
		if len(rest) > 0 {
			return Command{}, unsupported(fmt.Sprintf("%q after --version", rest[0]))
		}
		return Command{Kind: KindVersion, Format: shortVersion}, nil
	case "run":
		r, err := parseRun(rest)
		return Command{Kind: KindRun, Run: r}, err
	case "container":
		if len(rest) > 0 && rest[0] == "run" {
			r, err := parseRun(rest[1:])
			return Command{Kind: KindRun, Run: r}, err
		}
		return Command{}, unsupported(fmt.Sprintf("`container %s`", strings.Join(head(rest), " ")))
	case "version":
		return parseSimple(KindVersion, rest, 0, 0, "--format", "-f")
	case "pull":
		return parseSimple(KindPull, rest, 1, 1)
	case "inspect":
		return parseSimple(KindInspect, rest, 1, -1, "--format", "-f", "--type")
	case "tag":
		return parseSimple(KindTag, rest, 2, 2)
	case "rmi":
		return parseSimple(KindRmi, rest, 1, -1, "-f", "--force")
	case "images":
		return parseSimple(KindImages, rest, 0, 1, "-q", "--quiet", "--format")
	case "image":
		if len(rest) == 0 {
			return Command{}, errorf("`image` needs a subcommand: inspect, ls, rm, pull, tag")
		}
		switch rest[0] {
		case "inspect":
			return parseSimple(KindInspect, rest[1:], 1, -1, "--format", "-f")
		case "ls", "list":
			return parseSimple(KindImages, rest[1:], 0, 1, "-q", "--quiet", "--format")
		case "rm", "remove":
			return parseSimple(KindRmi, rest[1:], 1, -1, "-f", "--force")
		case "pull":
			return parseSimple(KindPull, rest[1:], 1, 1)
		case "tag":
			return parseSimple(KindTag, rest[1:], 2, 2)
		}
		return Command{}, unsupported(fmt.Sprintf("`image %s`", rest[0]))
	}
	if strings.HasPrefix(cmd, "-") {
		return Command{}, unsupported(fmt.Sprintf("the global flag %s", cmd))
	}
	return Command{}, unsupported(fmt.Sprintf("`%s`", cmd))
}

// shortVersion is the template of docker --version.
const shortVersion = "Docker version {{.Client.Version}}, kptr {{.Client.Kptr}}"

func head(s []string) []string {
	if len(s) > 1 {
		return s[:1]
	}
	return s
}

// parseSimple parses the commands that take images and a few flags: min to
// max operands (max -1: any number), flags among allowed (--format and -f,
// --type take a value; -q, -f of rmi, --force do not).
func parseSimple(kind string, args []string, minN, maxN int, allowed ...string) (Command, error) {
	c := Command{Kind: kind}
	takesValue := map[string]bool{"--format": true, "--type": true}
	if kind != KindRmi {
		takesValue["-f"] = true
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			c.Images = append(c.Images, a)
			continue
		}
		if a == "--" {
			c.Images = append(c.Images, args[i+1:]...)
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		if !contains(allowed, name) {
			return c, unsupported(fmt.Sprintf("the flag %s of `%s`", name, kind))
		}
		if takesValue[name] && !hasVal {
			if i+1 >= len(args) {
				return c, errorf("flag %s of `%s` needs a value", name, kind)
			}
			i++
			val = args[i]
		}
		switch name {
		case "--format", "-f":
			if kind == KindRmi {
				c.Force = true
			} else {
				c.Format = val
			}
		case "--type":
			if val != "image" {
				return c, unsupported("inspect --type "+val, "only images are known")
			}
		case "-q", "--quiet":
			c.Quiet = true
		case "--force":
			c.Force = true
		}
	}
	if len(c.Images) < minN || (maxN >= 0 && len(c.Images) > maxN) {
		want := fmt.Sprintf("%d", minN)
		switch {
		case maxN < 0:
			want = fmt.Sprintf("at least %d", minN)
		case maxN != minN:
			want = fmt.Sprintf("%d to %d", minN, maxN)
		}
		return c, errorf("`%s` takes %s argument(s), got %d", kind, want, len(c.Images))
	}
	return c, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseRun parses docker run's flags up to the image; what follows the
// image is the container's command line, passed as it is.
func parseRun(args []string) (Run, error) {
	var r Run
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			if i >= len(args) {
				break
			}
			r.Image, r.Args = args[i], rest(args[i+1:])
			return r, r.check()
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			r.Image, r.Args = a, rest(args[i+1:])
			return r, r.check()
		}
		name, val, hasVal := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "--") && len(a) > 2 {
			switch a[:2] {
			case "-e", "-a", "-u":
				// -eNAME=VALUE, -aSTDIN: a short flag with its value attached
				name, val, hasVal = a[:2], strings.TrimPrefix(a[2:], "="), true
			default:
				return r, unsupported(fmt.Sprintf("the flag %s of `run`", a))
			}
		}
		value := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", errorf("run: flag %s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "--rm":
			r.Remove, err = boolFlag(name, val, hasVal)
		case "-i", "--interactive":
			r.Interactive, err = boolFlag(name, val, hasVal)
		case "-a", "--attach":
			var s string
			if s, err = value(); err == nil {
				switch strings.ToUpper(s) {
				case "STDIN", "STDOUT", "STDERR":
					r.Attach = append(r.Attach, strings.ToUpper(s))
				default:
					err = errorf("run: --attach %q: want STDIN, STDOUT or STDERR", s)
				}
			}
		case "--network", "--net":
			var s string
			if s, err = value(); err == nil {
				if s != "none" && s != "host" {
					err = unsupported("run --network "+s, "a function gets no network (none) or the host's (host)")
				}
				r.Network = s
			}
		case "-u", "--user":
			r.User, err = value()
			if err == nil && r.User == "" {
				err = errorf("run: --user is empty")
			}
		case "--security-opt":
			var s string
			if s, err = value(); err == nil {
				switch s {
				case "no-new-privileges", "no-new-privileges:true", "no-new-privileges=true":
					r.NoNewPr = true
				default:
					err = unsupported("run --security-opt "+s, "functions always run with no-new-privileges and kptr's own seccomp policy")
				}
			}
		case "--pull":
			var s string
			if s, err = value(); err == nil {
				switch s {
				case "never", "always", "missing":
					r.Pull = s
				default:
					err = errorf("run: --pull %q: want never, always or missing", s)
				}
			}
		case "--mount":
			var s string
			if s, err = value(); err == nil {
				var m Mount
				if m, err = ParseMount(s); err == nil {
					r.Mounts = append(r.Mounts, m)
				}
			}
		case "-e", "--env":
			var s string
			if s, err = value(); err == nil {
				k, v, ok := strings.Cut(s, "=")
				if k == "" {
					err = errorf("run: -e %q: no variable name", s)
				}
				r.Env = append(r.Env, Env{Name: k, Value: v, HasValue: ok})
			}
		default:
			err = unsupported(fmt.Sprintf("the flag %s of `run`", name))
		}
		if err != nil {
			return r, err
		}
	}
	return r, errorf("run: no image given")
}

// rest is the container's arguments, nil when there are none.
func rest(a []string) []string {
	if len(a) == 0 {
		return nil
	}
	return a
}

func (r Run) check() error {
	if r.Image == "" {
		return errorf("run: no image given")
	}
	return nil
}

// boolFlag reads --flag or --flag=true|false.
func boolFlag(name, val string, hasVal bool) (bool, error) {
	if !hasVal {
		return true, nil
	}
	switch val {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errorf("run: %s=%q: want true or false", name, val)
}

// ParseMount reads docker's --mount value: comma-separated KEY=VALUE
// fields (type, source|src, target|destination|dst, readonly|ro, rw) as
// kyaml and kpt write them. Options of other mount types (bind-propagation,
// volume-driver, tmpfs-size, ...) are refused, not dropped.
func ParseMount(s string) (Mount, error) {
	var m Mount
	for _, f := range strings.Split(s, ",") {
		k, v, hasVal := strings.Cut(f, "=")
		switch strings.ToLower(k) {
		case "type":
			switch v {
			case "bind", "volume", "tmpfs":
				m.Type = v
			default:
				return m, unsupported("--mount type="+v, "bind, volume and tmpfs are")
			}
		case "source", "src":
			m.Source = v
		case "target", "destination", "dst":
			if t, ok := strings.CutSuffix(v, ":ro"); ok {
				// kyaml before v0.10 wrote "dst=PATH:ro"
				v, m.ReadOnly = t, true
			}
			m.Target = v
		case "readonly", "ro":
			b, err := mountBool(s, k, v, hasVal)
			if err != nil {
				return m, err
			}
			m.ReadOnly, m.ReadWrite = b, !b
		case "rw":
			b, err := mountBool(s, k, v, hasVal)
			if err != nil {
				return m, err
			}
			m.ReadOnly, m.ReadWrite = !b, b
		case "":
			if f == "" {
				continue
			}
			fallthrough
		default:
			return m, unsupported(fmt.Sprintf("the --mount option %q", k))
		}
	}
	if m.Type == "" {
		return m, errorf("--mount %q: no type (bind, volume or tmpfs)", s)
	}
	if m.Target == "" || !strings.HasPrefix(m.Target, "/") {
		return m, errorf("--mount %q: target must be an absolute path in the container", s)
	}
	switch {
	case m.Type == "bind" && m.Source == "":
		return m, errorf("--mount %q: a bind mount needs a source", s)
	case m.Type == "tmpfs" && m.Source != "":
		return m, errorf("--mount %q: a tmpfs mount takes no source", s)
	}
	return m, nil
}

func mountBool(s, k, v string, hasVal bool) (bool, error) {
	if !hasVal {
		return true, nil
	}
	switch strings.ToLower(v) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, errorf("--mount %q: %s=%q: want true or false", s, k, v)
}

// IsError reports whether err is the face's refusal of a command line.
func IsError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
