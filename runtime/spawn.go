package runtime

import (
	goruntime "runtime"
	"sync"
)

// Linux delivers a child's parent-death signal when the *thread* that forked
// it exits, not the process (go.dev/issue/27505), and Go ends threads: any
// goroutine that exits while locked to its thread takes the thread with it,
// as libcontainer's own mount-source helper does on every start. A sandbox
// whose init was forked from such a thread would be SIGKILLed mid-run. So
// every fork of a sandbox or host function happens on one of a few threads
// that are locked for the life of the process and never exit.
const spawnThreads = 4

type spawnReq struct {
	fn   func() error
	done chan error
}

var (
	spawnOnce sync.Once
	spawnCh   = make(chan spawnReq)
)

// OnStableThread runs fn (which forks) on a thread that outlives the child.
func OnStableThread(fn func() error) error {
	spawnOnce.Do(func() {
		for range spawnThreads {
			go func() {
				goruntime.LockOSThread() // never unlocked: this thread lives as long as kptr
				for r := range spawnCh {
					r.done <- r.fn()
				}
			}()
		}
	})
	done := make(chan error, 1)
	spawnCh <- spawnReq{fn: fn, done: done}
	return <-done
}
