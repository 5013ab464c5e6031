package lazyre

import "testing"

func TestCompilesOnceOnFirstUse(t *testing.T) {
	re := New(`^a+$`)
	first := re()
	if !first.MatchString("aaa") || first.MatchString("ab") {
		t.Fatal("the expression does not match as written")
	}
	if re() != first {
		t.Error("a second call compiled the expression again")
	}
}

func TestMalformedPanicsAtFirstUse(t *testing.T) {
	re := New(`(`) // declaring it must not panic
	defer func() {
		if recover() == nil {
			t.Error("a malformed expression did not panic at its first use")
		}
	}()
	re()
}
