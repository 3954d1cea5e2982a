package lease

import (
	"testing"
	"unsafe"
)

// Every held lock has a Hold: S7 holds 100 000 per Client, and the size
// class of a Hold is most of what a held lock costs. What few holds need
// lives in holdExtra, made on first use.
func TestHold_size(t *testing.T) {
	if got, want := unsafe.Sizeof(Hold{}), uintptr(112); got > want {
		t.Errorf("unsafe.Sizeof(Hold{}) = %d, want <= %d (a size class of the allocator)", got, want)
	}
}
