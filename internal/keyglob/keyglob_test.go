package keyglob

import "testing"

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"":          "",
		"lock:":     "lock:",
		`a*b?[c]\d`: `a\*b\?\[c\]\\d`,
		"ünï*":      `ünï\*`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}
