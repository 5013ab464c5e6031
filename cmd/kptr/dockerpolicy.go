package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kptr-dev/kptr/cmd/kptr/internal/dockerface"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/internal/lazyre"
	"github.com/kptr-dev/kptr/runtime"
)

// The operator's policy for the docker face. Whoever writes the command
// line docker receives is not the operator: kustomize builds it from a
// kustomization's function config (its image, network, mounts and envs),
// and in an Argo CD repo-server that kustomization comes from any Git
// repository an Application names. So the command line only asks; the
// policy, read from the variables of kptr's own pod spec, decides:
//
//   - network: none always; host only with KPTR_ALLOW_NETWORK (the setting
//     fn render --allow-network and generate obey).
//   - mounts: a bind mount's source, symlinks resolved, must lie beneath a
//     directory of KPTR_DOCKER_BIND_DIRS (default: the current directory,
//     where kustomize and kpt run); bind and volume mounts are read-only
//     unless the caller wrote rw=true; a tmpfs is a fresh empty directory.
//   - environment: "-e NAME=VALUE" is passed (its value is written in the
//     command line, so in the repository). "-e NAME" asks for the caller's
//     own value of NAME, and the caller's environment is the repo-server's:
//     Argo CD's Redis password, repository credentials, cloud tokens. Only
//     the names KPTR_DOCKER_ENV lists are passed (default: LOG_TO_STDERR and
//     STRUCTURED_RESULTS, which kyaml sets for its functions; "none": no
//     name at all); any other is
//     left out, as if unset. kyaml before v0.13 asked for every variable of
//     its environment this way.
//   - images: when KPTR_ALLOWED_IMAGES is set, only the images it allows.
type dockerPolicy struct {
	allowNetwork  bool
	bindDirs      []string // absolute, symlinks resolved
	passEnv       map[string]bool
	allowedImages []string
}

// chainPolicy is the operator's policy the function chain enforces: the
// allow-list of images, when KPTR_ALLOWED_IMAGES is set (network, mounts
// and environment were decided by invocation already).
func (p dockerPolicy) chainPolicy() *fnenv.Policy {
	if len(p.allowedImages) == 0 {
		return nil
	}
	return &fnenv.Policy{AllowedImages: p.allowedImages, AllowExec: true, AllowNetwork: true, AllowMounts: true}
}

// defaultDockerEnv are the variables "-e NAME" may take by default.
var defaultDockerEnv = []string{"LOG_TO_STDERR", "STRUCTURED_RESULTS"}

// dockerPolicyFromEnv reads the policy from the operator's variables.
func dockerPolicyFromEnv(getenv func(string) string) dockerPolicy {
	p := dockerPolicy{allowNetwork: envBool(getenv("KPTR_ALLOW_NETWORK")), passEnv: map[string]bool{}}
	names := defaultDockerEnv
	switch v := strings.TrimSpace(getenv("KPTR_DOCKER_ENV")); v {
	case "":
	case "none":
		names = nil
	default:
		names = splitList(v)
	}
	for _, n := range names {
		p.passEnv[n] = true
	}
	dirs := filepath.SplitList(getenv("KPTR_DOCKER_BIND_DIRS"))
	if len(dirs) == 0 {
		if wd, err := os.Getwd(); err == nil {
			dirs = []string{wd}
		}
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if real, err := realPath(d); err == nil {
			p.bindDirs = append(p.bindDirs, real)
		}
	}
	if v := getenv("KPTR_ALLOWED_IMAGES"); strings.TrimSpace(v) != "" {
		p.allowedImages = splitList(v)
	}
	return p
}

// realPath is p absolute, every symlink resolved.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// beneath reports whether path lies in dir or below it.
func beneath(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// volumeName is docker's rule for a named volume.
var volumeName = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// invocation turns the caller's run into the function's invocation, or
// refuses it with one line naming the setting that forbids it. cleanup
// removes the directories made for tmpfs and anonymous volume mounts; it is
// safe to call whatever invocation returned.
func (p dockerPolicy) invocation(r dockerface.Run, getenv func(string) string, volumeDir string) (inv runtime.Invocation, cleanup func(), err error) {
	var made []string
	cleanup = func() {
		for _, d := range made {
			_ = os.RemoveAll(d)
		}
	}
	switch r.Network {
	case "host":
		if !p.allowNetwork {
			return inv, cleanup, fmt.Errorf("run --network host: the operator's policy gives functions no network (set KPTR_ALLOW_NETWORK=true to allow it)")
		}
		inv.Network = true
	case "none", "":
	}
	for _, m := range r.Mounts {
		mt := runtime.Mount{Target: m.Target, ReadOnly: !m.ReadWrite}
		switch m.Type {
		case "bind":
			real, err := realPath(m.Source)
			if err != nil {
				return inv, cleanup, fmt.Errorf("run --mount source %s: %v", m.Source, err)
			}
			ok := false
			for _, d := range p.bindDirs {
				ok = ok || beneath(real, d)
			}
			if !ok {
				return inv, cleanup, fmt.Errorf("run --mount source %s: not beneath a directory the operator allows bind mounts from (KPTR_DOCKER_BIND_DIRS: %s)", m.Source, strings.Join(p.bindDirs, ":"))
			}
			mt.Source = real
		case "volume":
			if m.Source == "" {
				d, err := scratchDir("kptr-volume-")
				if err != nil {
					return inv, cleanup, err
				}
				made = append(made, d)
				mt.Source = d
				break
			}
			if !volumeName().MatchString(m.Source) {
				return inv, cleanup, fmt.Errorf("run --mount: %q is not a volume name", m.Source)
			}
			if volumeDir == "" {
				return inv, cleanup, fmt.Errorf("run --mount: named volumes live beside the cache, and there is no cache directory")
			}
			d := filepath.Join(volumeDir, m.Source)
			if err := os.MkdirAll(d, 0o700); err != nil {
				return inv, cleanup, fmt.Errorf("run --mount volume %s: %v", m.Source, err)
			}
			// the function's user is not kptr's: as a docker volume, anyone in it may write
			if err := os.Chmod(d, 0o1777); err != nil {
				return inv, cleanup, err
			}
			mt.Source = d
		case "tmpfs":
			d, err := scratchDir("kptr-tmpfs-")
			if err != nil {
				return inv, cleanup, err
			}
			made = append(made, d)
			// a fresh empty directory of this run alone: writable unless
			// the caller said readonly
			mt.Source, mt.ReadOnly = d, m.ReadOnly
		}
		inv.Mounts = append(inv.Mounts, mt)
	}
	for _, e := range r.Env {
		switch {
		case e.HasValue:
			inv.Env = append(inv.Env, e.Name+"="+e.Value)
		case p.passEnv[e.Name]:
			if v := getenv(e.Name); v != "" {
				inv.Env = append(inv.Env, e.Name+"="+v)
			}
		}
	}
	return inv, cleanup, nil
}

// scratchDir is a new empty directory any user may write (the function's
// uid is not kptr's), removed by the run's cleanup.
func scratchDir(prefix string) (string, error) {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(d, 0o1777); err != nil {
		_ = os.RemoveAll(d)
		return "", err
	}
	return d, nil
}
