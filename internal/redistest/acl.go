package redistest

import (
	"context"
	"fmt"
)

// ACLSetUser creates or updates an ACL user on the server, running
//
//	ACL SETUSER name on >password rules...
//
// A new user starts with no keys and no commands, so rules usually grant
// some, for example "~*", "&*", "+@all", "-@scripting" for a user that may
// do anything but run scripts. Connect as the user with
//
//	o := s.Options()
//	o.Username, o.Password = name, password
//	rdb := redis.NewClient(o)
//
// It returns the server's error, such as a syntax error in a rule.
func (s *Server) ACLSetUser(ctx context.Context, name, password string, rules ...string) error {
	rdb := s.adminClient()
	defer rdb.Close()
	args := []any{"ACL", "SETUSER", name, "on", ">" + password}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := rdb.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("redistest: acl setuser %q on %s: %w", name, s.ep.addr, err)
	}
	return nil
}
