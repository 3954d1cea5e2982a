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
