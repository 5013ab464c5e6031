package wasm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// jsImports are the host functions of Go's js/wasm port, by import name.
// Each takes the module's stack pointer: arguments and results live in
// linear memory at fixed offsets from it (sp+8 is the first argument).
var jsImports = map[string]func(h *jsHost, ctx context.Context, sp uint32){
	"runtime.wasmExit":              (*jsHost).wasmExit,
	"runtime.wasmWrite":             (*jsHost).wasmWrite,
	"runtime.resetMemoryDataView":   func(*jsHost, context.Context, uint32) {},
	"runtime.nanotime1":             (*jsHost).nanotime,
	"runtime.walltime":              (*jsHost).walltime,
	"runtime.scheduleTimeoutEvent":  (*jsHost).scheduleTimeout,
	"runtime.clearTimeoutEvent":     (*jsHost).clearTimeout,
	"runtime.getRandomData":         (*jsHost).randomData,
	"syscall/js.finalizeRef":        (*jsHost).finalizeRef,
	"syscall/js.stringVal":          (*jsHost).stringVal,
	"syscall/js.valueGet":           (*jsHost).valueGet,
	"syscall/js.valueSet":           (*jsHost).valueSet,
	"syscall/js.valueDelete":        (*jsHost).valueDelete,
	"syscall/js.valueIndex":         (*jsHost).valueIndex,
	"syscall/js.valueSetIndex":      (*jsHost).valueSetIndex,
	"syscall/js.valueCall":          (*jsHost).valueCall,
	"syscall/js.valueInvoke":        (*jsHost).valueInvoke,
	"syscall/js.valueNew":           (*jsHost).valueNew,
	"syscall/js.valueLength":        (*jsHost).valueLength,
	"syscall/js.valuePrepareString": (*jsHost).valuePrepareString,
	"syscall/js.valueLoadString":    (*jsHost).valueLoadString,
	"syscall/js.valueInstanceOf":    (*jsHost).valueInstanceOf,
	"syscall/js.copyBytesToGo":      (*jsHost).copyBytesToGo,
	"syscall/js.copyBytesToJS":      (*jsHost).copyBytesToJS,
}

// jsModuleNames are the import module names of the js port: "gojs" since
// Go 1.21, "go" before (same functions).
var jsModuleNames = []string{"gojs", "go"}

type hostKey struct{}

// instantiateJSHost defines the js host modules once per wazero runtime; the
// state of a run travels in the context (hostKey), so one definition serves
// every concurrent run.
func instantiateJSHost(ctx context.Context, rt wazero.Runtime) error {
	for _, modName := range jsModuleNames {
		b := rt.NewHostModuleBuilder(modName)
		for name, fn := range jsImports {
			fn := fn
			b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
				h, _ := ctx.Value(hostKey{}).(*jsHost)
				if h == nil {
					panic(errors.New("js host function called outside a run"))
				}
				fn(h, ctx, api.DecodeU32(stack[0]))
			}), []api.ValueType{api.ValueTypeI32}, nil).Export(name)
		}
		// debug(value) is a debugging aid of the port; it prints nothing here.
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
			[]api.ValueType{api.ValueTypeI32}, nil).Export("debug")
		if _, err := b.Instantiate(ctx); err != nil {
			return err
		}
	}
	return nil
}

// jsHost is the host side of one run of a js/wasm module.
type jsHost struct {
	mod    api.Module
	mem    api.Memory
	resume api.Function
	getsp  api.Function

	values *valueTable
	global *jsObject
	goObj  *jsObject

	stdin          io.Reader
	stdout, stderr *cappedBuffer

	start     time.Time
	timers    map[int32]time.Time
	nextTimer int32

	exited   bool
	exitCode uint32
	resumes  int // how often Go code ran: the stack may have moved since

	// curCtx is the context of the current outermost call into the module:
	// host functions re-enter the module (callbacks) with it.
	curCtx context.Context
}

func newJSHost(stdin io.Reader, stdout, stderr *cappedBuffer, b *budget) *jsHost {
	h := &jsHost{stdin: stdin, stdout: stdout, stderr: stderr, start: time.Now(),
		timers: map[int32]time.Time{}, nextTimer: 1}
	h.goObj = newObject()
	h.goObj.props["_pendingEvent"] = nil
	h.goObj.props["_makeFuncWrapper"] = newFunc(func(_ any, args []any) any {
		id, _ := arg(args, 0).(float64)
		return newFunc(func(this any, args []any) any { return h.callGo(uint32(id), this, args) })
	})
	h.global = newObject()
	h.values = newValueTable(h.global, h.goObj, b)
	h.defineGlobals()
	return h
}

// attach binds the instantiated module.
func (h *jsHost) attach(m api.Module) error {
	h.mod, h.mem = m, m.Memory()
	h.resume, h.getsp = m.ExportedFunction("resume"), m.ExportedFunction("getsp")
	if h.mem == nil || h.resume == nil || h.getsp == nil || m.ExportedFunction("run") == nil {
		return errors.New("not a Go js/wasm module: it lacks the run, resume or getsp export or its memory")
	}
	return nil
}

// runMain writes argv and env as the js port expects them (at 4096, below the
// data the linker places from 12288) and starts the program; it returns when
// the program exits or waits for an event.
func (h *jsHost) runMain(ctx context.Context, args, env []string) error {
	off := uint32(4096)
	var ptrs []uint32
	put := func(s string) error {
		b := append([]byte(s), 0)
		if off+uint32(len(b)) >= 12288 {
			return errors.New("arguments and environment exceed the js port's 8 KiB")
		}
		h.mem.Write(off, b)
		p := off
		off += uint32(len(b))
		off = (off + 7) &^ 7
		ptrs = append(ptrs, p)
		return nil
	}
	for _, a := range args {
		if err := put(a); err != nil {
			return err
		}
	}
	ptrs = append(ptrs, 0)
	for _, e := range env {
		if err := put(e); err != nil {
			return err
		}
	}
	ptrs = append(ptrs, 0)
	argv := off
	for _, p := range ptrs {
		if off+8 >= 12288 {
			return errors.New("arguments and environment exceed the js port's 8 KiB")
		}
		h.mem.WriteUint64Le(off, uint64(p))
		off += 8
	}
	_, err := h.mod.ExportedFunction("run").Call(ctx, uint64(len(args)), uint64(argv))
	return h.exitErr(err)
}

// exitErr turns the module's own exit into a nil error (exitCode holds it).
func (h *jsHost) exitErr(err error) error {
	var ee *sys.ExitError
	if err != nil && h.exited && errors.As(err, &ee) {
		return nil
	}
	return err
}

// callGo runs the Go function id (a js.FuncOf) with this and args, as the
// port's function wrappers do: the call is left as the pending event and
// the module resumed; the function's result is left on the event.
func (h *jsHost) callGo(id uint32, this any, args []any) any {
	if h.exited {
		throwError("", "Go program has already exited")
	}
	ev := newObject()
	ev.props["id"] = float64(id)
	ev.props["this"] = this
	ev.props["args"] = &jsArray{items: args}
	h.goObj.props["_pendingEvent"] = ev
	h.resumes++
	if _, err := h.resume.Call(h.ctx()); err != nil {
		panic(err) // unwinds the host call that led here (the module is done)
	}
	if r, ok := ev.props["result"]; ok {
		return r
	}
	return undefined
}

func (h *jsHost) ctx() context.Context { return h.curCtx }

// fireTimers resumes the module for each timer that comes due, sleeping until
// then, until the module exits or no timer is left; the context ends it.
func (h *jsHost) fireTimers(ctx context.Context) error {
	for !h.exited && len(h.timers) > 0 {
		id, at := int32(0), time.Time{}
		for i, t := range h.timers {
			if id == 0 || t.Before(at) {
				id, at = i, t
			}
		}
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		delete(h.timers, id)
		h.resumes++
		if _, err := h.resume.Call(ctx); err != nil {
			return h.exitErr(err)
		}
	}
	return nil
}

// Memory access. The module's own addresses are untrusted: an access outside
// its memory is a fault that ends the run.

var errMemory = errors.New("js host call refers outside the module's memory")

func (h *jsHost) u32(addr uint32) uint32 {
	v, ok := h.mem.ReadUint32Le(addr)
	if !ok {
		panic(errMemory)
	}
	return v
}

func (h *jsHost) i64(addr uint32) int64 {
	v, ok := h.mem.ReadUint64Le(addr)
	if !ok {
		panic(errMemory)
	}
	return int64(v)
}

func (h *jsHost) setU64(addr uint32, v uint64) {
	if !h.mem.WriteUint64Le(addr, v) {
		panic(errMemory)
	}
}

func (h *jsHost) setU8(addr uint32, v byte) {
	if !h.mem.WriteByte(addr, v) {
		panic(errMemory)
	}
}

// slice is the Go slice (pointer, length) at addr, as a view of memory.
func (h *jsHost) slice(addr uint32) []byte {
	p, n := h.i64(addr), h.i64(addr+8)
	if p < 0 || n < 0 || p > math.MaxUint32 || n > math.MaxUint32 {
		panic(errMemory)
	}
	b, ok := h.mem.Read(uint32(p), uint32(n))
	if !ok {
		panic(errMemory)
	}
	return b
}

func (h *jsHost) str(addr uint32) string { return string(h.slice(addr)) }

func (h *jsHost) load(addr uint32) any { return h.values.load(uint64(h.i64(addr))) }

func (h *jsHost) store(addr uint32, v any) { h.setU64(addr, h.values.ref(v)) }

// sp returns the stack pointer to write results at: Go code that ran during
// the call (a callback) may have moved the stack.
func (h *jsHost) spAfter(sp uint32, resumesBefore int) uint32 {
	if h.resumes == resumesBefore {
		return sp
	}
	r, err := h.getsp.Call(h.ctx())
	if err != nil {
		panic(err)
	}
	return api.DecodeU32(r[0])
}

// The runtime's imports.

func (h *jsHost) wasmExit(ctx context.Context, sp uint32) {
	code := h.u32(sp + 8)
	h.exited, h.exitCode = true, code
	_ = h.mod.CloseWithExitCode(ctx, code)
	panic(sys.NewExitError(code))
}

func (h *jsHost) wasmWrite(_ context.Context, sp uint32) {
	fd := h.i64(sp + 8)
	p := h.i64(sp + 16)
	n := h.u32(sp + 24)
	b, ok := h.mem.Read(uint32(p), n)
	if !ok || p < 0 || p > math.MaxUint32 {
		panic(errMemory)
	}
	h.writeFD(fd, b)
}

func (h *jsHost) writeFD(fd int64, b []byte) int {
	var w *cappedBuffer
	switch fd {
	case 1:
		w = h.stdout
	case 2:
		w = h.stderr
	default:
		return -1
	}
	if _, err := w.Write(b); err != nil {
		panic(err)
	}
	return len(b)
}

func (h *jsHost) nanotime(_ context.Context, sp uint32) {
	h.setU64(sp+8, uint64(time.Since(h.start).Nanoseconds()+1))
}

func (h *jsHost) walltime(_ context.Context, sp uint32) {
	now := time.Now()
	h.setU64(sp+8, uint64(now.Unix()))
	if !h.mem.WriteUint32Le(sp+16, uint32(now.Nanosecond())) {
		panic(errMemory)
	}
}

func (h *jsHost) scheduleTimeout(_ context.Context, sp uint32) {
	delay := h.i64(sp + 8)
	if len(h.timers) >= 1<<16 {
		panic(errors.New("too many pending timers"))
	}
	id := h.nextTimer
	h.nextTimer++
	h.timers[id] = time.Now().Add(time.Duration(delay)*time.Millisecond + time.Millisecond)
	if !h.mem.WriteUint32Le(sp+16, uint32(id)) {
		panic(errMemory)
	}
}

func (h *jsHost) clearTimeout(_ context.Context, sp uint32) {
	delete(h.timers, int32(h.u32(sp+8)))
}

func (h *jsHost) randomData(_ context.Context, sp uint32) {
	_, _ = rand.Read(h.slice(sp + 8))
}

// syscall/js's imports.

func (h *jsHost) finalizeRef(_ context.Context, sp uint32) { h.values.release(h.u32(sp + 8)) }

func (h *jsHost) stringVal(_ context.Context, sp uint32) { h.store(sp+24, h.str(sp+8)) }

func (h *jsHost) valueGet(_ context.Context, sp uint32) {
	h.store(sp+32, h.guard(func() any { return get(h.load(sp+8), h.str(sp+16)) }))
}

func (h *jsHost) valueSet(_ context.Context, sp uint32) {
	v, key, x := h.load(sp+8), h.str(sp+16), h.load(sp+32)
	if o, ok := v.(*jsObject); ok {
		if _, had := o.props[key]; !had {
			h.values.budget.charge(int64(len(key)) + 32)
		}
		o.props[key] = x
	}
}

func (h *jsHost) valueDelete(_ context.Context, sp uint32) {
	if o, ok := h.load(sp + 8).(*jsObject); ok {
		delete(o.props, h.str(sp+16))
	}
}

func (h *jsHost) valueIndex(_ context.Context, sp uint32) {
	h.store(sp+24, h.guard(func() any { return index(h.load(sp+8), h.i64(sp+16)) }))
}

func (h *jsHost) valueSetIndex(_ context.Context, sp uint32) {
	v, i, x := h.load(sp+8), h.i64(sp+16), h.load(sp+24)
	switch a := v.(type) {
	case *jsArray:
		if i >= 0 && i < int64(len(a.items)) {
			a.items[i] = x
		}
	case *jsBytes:
		if f, ok := x.(float64); ok && i >= 0 && i < int64(len(a.b)) {
			a.b[i] = byte(int64(f))
		}
	}
}

// guard turns a JavaScript exception in a getter into undefined (valueGet
// and valueIndex have no way to report one; Go's port would crash the
// module, which a later call then reports).
func (h *jsHost) guard(f func() any) (v any) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(*jsThrow); !ok {
				panic(r)
			}
			v = undefined
		}
	}()
	return f()
}

// try runs a call that may throw: the result or the thrown value, and
// whether it returned.
func (h *jsHost) try(f func() any) (v any, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			t, isThrow := r.(*jsThrow)
			if !isThrow {
				panic(r)
			}
			v, ok = t.value, false
		}
	}()
	return f(), true
}

func (h *jsHost) args(addr uint32) []any {
	p, n := h.i64(addr), h.i64(addr+8)
	if n < 0 || n > 1<<16 || p < 0 || p > math.MaxUint32 {
		panic(errMemory)
	}
	out := make([]any, n)
	for i := range out {
		out[i] = h.values.load(uint64(h.i64(uint32(p) + uint32(i)*8)))
	}
	return out
}

func (h *jsHost) valueCall(_ context.Context, sp uint32) {
	before := h.resumes
	v, name, args := h.load(sp+8), h.str(sp+16), h.args(sp+32)
	res, ok := h.try(func() any {
		fn, isFn := get(v, name).(*jsObject)
		if !isFn || fn.call == nil {
			throwError("", fmt.Sprintf("%s.%s is not a function", toString(v), name))
		}
		return fn.call(v, args)
	})
	sp = h.spAfter(sp, before)
	h.store(sp+56, res)
	h.setU8(sp+64, boolByte(ok))
}

func (h *jsHost) valueInvoke(_ context.Context, sp uint32) {
	before := h.resumes
	v, args := h.load(sp+8), h.args(sp+16)
	res, ok := h.try(func() any {
		fn, isFn := v.(*jsObject)
		if !isFn || fn.call == nil {
			throwError("", toString(v)+" is not a function")
		}
		return fn.call(undefined, args)
	})
	sp = h.spAfter(sp, before)
	h.store(sp+40, res)
	h.setU8(sp+48, boolByte(ok))
}

func (h *jsHost) valueNew(_ context.Context, sp uint32) {
	before := h.resumes
	v, args := h.load(sp+8), h.args(sp+16)
	res, ok := h.try(func() any {
		c, isCtor := v.(*jsObject)
		if !isCtor || c.construct == nil {
			throwError("", toString(v)+" is not a constructor")
		}
		return c.construct(args)
	})
	sp = h.spAfter(sp, before)
	h.store(sp+40, res)
	h.setU8(sp+48, boolByte(ok))
}

func (h *jsHost) valueLength(_ context.Context, sp uint32) {
	n := 0.0
	if f, ok := h.guard(func() any { return get(h.load(sp+8), "length") }).(float64); ok {
		n = f
	}
	h.setU64(sp+16, uint64(int64(n)))
}

func (h *jsHost) valuePrepareString(_ context.Context, sp uint32) {
	s := toString(h.load(sp + 8))
	h.store(sp+16, &jsBytes{b: []byte(s)})
	h.setU64(sp+24, uint64(len(s)))
}

func (h *jsHost) valueLoadString(_ context.Context, sp uint32) {
	src, ok := h.load(sp + 8).(*jsBytes)
	if !ok {
		panic(errors.New("valueLoadString of a value that is not a prepared string"))
	}
	copy(h.slice(sp+16), src.b)
}

func (h *jsHost) valueInstanceOf(_ context.Context, sp uint32) {
	v, t := h.load(sp+8), h.load(sp+16)
	is := false
	switch x := v.(type) {
	case *jsObject:
		is = x.ctor != nil && x.ctor == t
	case *jsBytes:
		is = t == h.global.props["Uint8Array"]
	case *jsArray:
		is = t == h.global.props["Array"]
	}
	h.setU8(sp+24, boolByte(is))
}

func (h *jsHost) copyBytesToGo(_ context.Context, sp uint32) {
	dst := h.slice(sp + 8)
	src, ok := h.load(sp + 32).(*jsBytes)
	if !ok {
		h.setU8(sp+48, 0)
		return
	}
	n := copy(dst, src.b)
	h.setU64(sp+40, uint64(n))
	h.setU8(sp+48, 1)
}

func (h *jsHost) copyBytesToJS(_ context.Context, sp uint32) {
	dst, ok := h.load(sp + 8).(*jsBytes)
	if !ok {
		h.setU8(sp+48, 0)
		return
	}
	n := copy(dst.b, h.slice(sp+16))
	h.setU64(sp+40, uint64(n))
	h.setU8(sp+48, 1)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func arg(args []any, i int) any {
	if i < len(args) {
		return args[i]
	}
	return undefined
}
