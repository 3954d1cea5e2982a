package adminhook

import "testing"

func TestAuditToken(t *testing.T) {
	for _, tc := range []struct{ id, token, hold string }{
		{"pod-a#5d1c", "pod-a", "pod-a#5d1c"},
		{"team#7#5d1c", "team#7", "team#7#5d1c"},
		{"0b9c7d1e-6f0a-4c1b-9d7e-2f3a4b5c6d7e", "0b9c7d1e-6f0a-4c1b-9d7e-2f3a4b5c6d7e", ""},
		{"", "", ""},
		{"#x", "#x", ""},
	} {
		if token, hold := AuditToken(tc.id); token != tc.token || hold != tc.hold {
			t.Errorf("AuditToken(%q) = %q, %q; want %q, %q", tc.id, token, hold, tc.token, tc.hold)
		}
	}
}
