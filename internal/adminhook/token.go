package adminhook

import "strings"

// AuditToken splits a hold's id into the token its audit entries show and
// the hold field they add. A re-entrant hold (WithOwner) is stored under
// "owner#id": its entries name it by the owner id, as Token() does, with
// the whole id as hold. Any other id is its own token, with no hold field.
func AuditToken(id string) (token, hold string) {
	if i := strings.LastIndexByte(id, '#'); i > 0 {
		return id[:i], id
	}
	return id, ""
}
