package lease

import (
	"errors"
	"testing"
)

func TestJoinErrs(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	if JoinErrs() != nil || JoinErrs(nil, nil) != nil {
		t.Fatal("JoinErrs of nothing is not nil")
	}
	if JoinErrs(nil, a) != a {
		t.Fatal("JoinErrs of one error is not that error")
	}
	if err := JoinErrs(a, nil, b); !errors.Is(err, a) || !errors.Is(err, b) {
		t.Fatalf("JoinErrs(a, b) = %v, want both", err)
	}
}

func TestOpError_saysEachPrefixOnce(t *testing.T) {
	lost := errors.New(`lock: lock "k" lost (stolen)`)
	for _, tt := range []struct {
		err  error
		want string
	}{
		{NewOpError("lock", "release", "k", ErrNotHeld), `lock: release "k": not held`},
		{NewOpError("lock", "extend", "k", ErrNotHeld, lost), `lock: extend "k": not held: lock "k" lost (stolen)`},
		{NewOpError("redlock", "key", "", Invalidf("empty key")), `redlock: key "": invalid argument: empty key`},
		{NewOpError("redlock", "acquire", "k", errors.New("redlock: quorum not reached")), `redlock: acquire "k": quorum not reached`},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	err := NewOpError("lock", "extend", "k", ErrNotHeld, lost)
	if !errors.Is(err, ErrNotHeld) || !errors.Is(err, lost) {
		t.Fatalf("%v matches neither ErrNotHeld nor the loss", err)
	}
	if errors.Unwrap(NewOpError("lock", "acquire", "k", lost)) != lost {
		t.Fatal("an OpError of one error does not unwrap to it")
	}
}
