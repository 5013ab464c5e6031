package wasm

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// The JavaScript values a Go js/wasm module can hold references to. Go's
// syscall/js sees values only through the host calls, so a small model is
// enough: undefined, null (nil), booleans, numbers (float64), strings,
// objects (with functions and constructors as objects that can be called),
// arrays and byte arrays (Uint8Array).

// jsUndefined is JavaScript's undefined.
type jsUndefined struct{}

var undefined = jsUndefined{}

// jsObject is an object; call makes it a function, construct a constructor.
type jsObject struct {
	props     map[string]any
	call      func(this any, args []any) any // may panic with *jsThrow
	construct func(args []any) any
	ctor      *jsObject // the constructor that made it (instanceof)
}

func newObject() *jsObject { return &jsObject{props: map[string]any{}} }

func newFunc(call func(this any, args []any) any) *jsObject {
	return &jsObject{props: map[string]any{}, call: call}
}

// jsArray is an Array.
type jsArray struct{ items []any }

// jsBytes is a Uint8Array.
type jsBytes struct{ b []byte }

// jsThrow is a JavaScript exception a host function raises: the value a Go
// module receives as the thrown error of valueCall, valueInvoke or valueNew.
type jsThrow struct{ value any }

// throwError raises an Error object with a message and a Node-style code.
func throwError(code, msg string) {
	e := newObject()
	e.props["message"] = msg
	if code != "" {
		e.props["code"] = code
	}
	panic(&jsThrow{value: e})
}

// errorValue is what a Node-style callback receives as its error argument.
func errorValue(code string) *jsObject {
	e := newObject()
	e.props["message"] = code
	e.props["code"] = code
	return e
}

// get is Reflect.get(v, key).
func get(v any, key string) any {
	switch x := v.(type) {
	case *jsObject:
		if p, ok := x.props[key]; ok {
			return p
		}
	case *jsArray:
		if key == "length" {
			return float64(len(x.items))
		}
	case *jsBytes:
		if key == "length" || key == "byteLength" {
			return float64(len(x.b))
		}
	case string:
		if key == "length" {
			return float64(len(x))
		}
	case jsUndefined, nil:
		throwError("", fmt.Sprintf("Cannot read properties of %s (reading '%s')", toString(v), key))
	}
	return undefined
}

// index is Reflect.get(v, i).
func index(v any, i int64) any {
	switch x := v.(type) {
	case *jsArray:
		if i >= 0 && i < int64(len(x.items)) {
			return x.items[i]
		}
	case *jsBytes:
		if i >= 0 && i < int64(len(x.b)) {
			return float64(x.b[i])
		}
	case *jsObject:
		return get(x, strconv.FormatInt(i, 10))
	case jsUndefined, nil:
		throwError("", fmt.Sprintf("Cannot read properties of %s (reading '%d')", toString(v), i))
	}
	return undefined
}

// toString is JavaScript's String(v).
func toString(v any) string {
	switch x := v.(type) {
	case jsUndefined:
		return "undefined"
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return formatNumber(x)
	case string:
		return x
	case *jsArray:
		return "[object Array]"
	case *jsBytes:
		return "[object Uint8Array]"
	case *jsObject:
		if x.call != nil {
			return "function () { [native code] }"
		}
		if m, ok := x.props["message"].(string); ok {
			return "Error: " + m
		}
		return "[object Object]"
	}
	return ""
}

func formatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == math.Trunc(f) && math.Abs(f) < 1e21:
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// typeFlag is the kind bits Go's syscall/js keeps in a reference.
func typeFlag(v any) uint32 {
	switch x := v.(type) {
	case string:
		return 2
	case *jsObject:
		if x.call != nil {
			return 4
		}
		return 1
	case *jsArray, *jsBytes:
		return 1
	}
	return 0
}

// Reference ids Go's syscall/js predefines.
const (
	idNaN    = 0
	idZero   = 1
	idNull   = 2
	idTrue   = 3
	idFalse  = 4
	idGlobal = 5
	idGo     = 6
	idFirst  = 7 // the first id handed out
	nanHead  = 0x7FF80000
)

var errValueLimit = errors.New("js value limit reached")

// valueTable holds the values a module has references to, by id, with
// Go's reference counts (finalizeRef releases them). Objects are identified
// by pointer and strings by content, as JavaScript compares them, so that
// syscall/js's Value.Equal holds.
type valueTable struct {
	values []any
	counts []int64
	ids    map[any]uint32
	free   []uint32
	budget *budget
}

func newValueTable(global, goObj *jsObject, b *budget) *valueTable {
	t := &valueTable{
		values: []any{math.NaN(), float64(0), nil, true, false, global, goObj},
		ids:    map[any]uint32{global: idGlobal, goObj: idGo},
		budget: b,
	}
	t.counts = make([]int64, len(t.values))
	for i := range t.counts {
		t.counts[i] = math.MaxInt64 / 2 // never released
	}
	return t
}

// ref returns the reference (as syscall/js encodes it) of v, taking one
// count on it.
func (t *valueTable) ref(v any) uint64 {
	switch x := v.(type) {
	case jsUndefined:
		return 0
	case nil:
		return uint64(nanHead)<<32 | idNull
	case bool:
		if x {
			return uint64(nanHead)<<32 | idTrue
		}
		return uint64(nanHead)<<32 | idFalse
	case float64:
		switch {
		case x == 0:
			return uint64(nanHead)<<32 | idZero
		case math.IsNaN(x):
			return uint64(nanHead) << 32
		}
		return math.Float64bits(x)
	case int:
		return t.ref(float64(x))
	}
	id, ok := t.ids[v]
	if !ok {
		t.budget.charge(valueCost(v))
		if n := len(t.free); n > 0 {
			id = t.free[n-1]
			t.free = t.free[:n-1]
			t.values[id], t.counts[id] = v, 0
		} else {
			if len(t.values) >= maxValues {
				panic(errValueLimit)
			}
			id = uint32(len(t.values))
			t.values = append(t.values, v)
			t.counts = append(t.counts, 0)
		}
		t.ids[v] = id
	}
	t.counts[id]++
	return uint64(nanHead|typeFlag(v))<<32 | uint64(id)
}

// load is the value reference r names; a reference to no value is a fault of
// the module.
func (t *valueTable) load(r uint64) any {
	f := math.Float64frombits(r)
	if f == 0 {
		return undefined
	}
	if !math.IsNaN(f) {
		return f
	}
	id := uint32(r)
	if int(id) >= len(t.values) {
		panic(fmt.Errorf("js reference %d names no value", id))
	}
	return t.values[id]
}

// release is finalizeRef: Go dropped one reference to id.
func (t *valueTable) release(id uint32) {
	if id < idFirst || int(id) >= len(t.values) {
		return
	}
	t.counts[id]--
	if t.counts[id] == 0 {
		v := t.values[id]
		t.budget.refund(valueCost(v))
		delete(t.ids, v)
		t.values[id] = nil
		t.free = append(t.free, id)
	}
}

// maxValues bounds the live references of one module.
const maxValues = 1 << 20

// valueCost is what holding v costs the host, roughly, in bytes.
func valueCost(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x)) + 32
	case *jsBytes:
		return int64(len(x.b)) + 32
	case *jsArray:
		return int64(len(x.items))*16 + 32
	}
	return 64
}

// budget bounds the host memory a module's js values take. Charges past the
// limit end the run (a panic inside a host function closes the module).
type budget struct {
	used, limit int64
}

var errHostMemory = errors.New("js values exceed the memory limit")

func (b *budget) charge(n int64) {
	b.used += n
	if b.used > b.limit {
		panic(errHostMemory)
	}
}

func (b *budget) refund(n int64) {
	b.used -= n
	if b.used < 0 {
		b.used = 0
	}
}
