package namespace

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/configs/validate"
)

// runControllers are the cgroup v1 hierarchies a run joins: memory and pids,
// where kptr sets its limits, and devices, which holds libcontainer's device
// rules (libcontainer refuses to run without it). libcontainer.Create joins
// every v1 hierarchy mounted on the host instead (cpuset, cpu, cpuacct,
// blkio, freezer, net_cls, perf_event, name=systemd, the hybrid unified one:
// a dozen here), for limits kptr never sets: a mkdir, a write to
// cgroup.procs and an rmdir each, per run. In the others a function stays
// in kptr's own cgroup; its cgroup namespace, where it has one, hides them.
var runControllers = []string{"devices", "memory", "pids"}

// createContainer is libcontainer.Create for one run, with the run's cgroup
// v1 hierarchies limited to runControllers. libcontainer takes the
// hierarchies of a container from its saved state (Load), never from its
// configuration, so on a v1 host the state is written here the way Create
// and a container's start leave it (a state directory <stateDir>/<id>, mode
// 0711, holding state.json), after the configuration passed libcontainer's
// own validation, and read back with Load. On a cgroup v2 host there is one
// hierarchy anyway: Create as it is.
func createContainer(stateDir, id string, cfg *configs.Config) (*libcontainer.Container, error) {
	if cgroups.IsCgroup2UnifiedMode() {
		return libcontainer.Create(stateDir, id, cfg)
	}
	paths := runCgroupPaths(cfg.Cgroups)
	if paths["devices"] == "" {
		// No devices hierarchy: libcontainer refuses that, and says so.
		return libcontainer.Create(stateDir, id, cfg)
	}
	if err := validate.Validate(cfg); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(stateDir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := root.Mkdir(id, 0o711); err != nil {
		return nil, err // also when it exists: never reuse another run's state
	}
	state, err := json.Marshal(libcontainer.State{
		BaseState:   libcontainer.BaseState{ID: id, Config: *cfg},
		Rootless:    cfg.RootlessEUID && cfg.RootlessCgroups,
		CgroupPaths: paths,
	})
	if err != nil {
		return nil, err
	}
	if err := root.WriteFile(filepath.Join(id, "state.json"), state, 0o600); err != nil {
		return nil, err
	}
	c, err := libcontainer.Load(stateDir, id)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	return c, nil
}

// runCgroupPaths are the v1 cgroups of a run in runControllers, where
// libcontainer's own v1 manager puts them: the relative path Parent/Name
// below kptr's own cgroup of each hierarchy. Hierarchies the host does not
// mount are left out, as libcontainer leaves them out.
func runCgroupPaths(c *cgroups.Cgroup) map[string]string {
	inner := path.Join(c.Parent, c.Name)
	paths := map[string]string{}
	for name, own := range ownCgroups() {
		paths[name] = filepath.Join(own, inner)
	}
	return paths
}

// ownCgroups are kptr's own v1 cgroups of runControllers' hierarchies,
// read once per process (/proc/self/cgroup and mountinfo, which every run
// read again; kptr is not moved between cgroups while it renders).
var ownCgroups = sync.OnceValue(func() map[string]string {
	own := map[string]string{}
	for _, name := range runControllers {
		if p, err := cgroups.GetOwnCgroupPath(name); err == nil {
			own[name] = p
		}
	}
	return own
})
