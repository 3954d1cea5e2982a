// Package keyglob quotes text for a Redis glob pattern (SCAN MATCH).
package keyglob

import "strings"

// Escape quotes the glob characters of s (*, ?, [, ] and \) so that a
// SCAN MATCH pattern matches s literally.
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
