package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// CommandCalls returns how many times the server has run the commands
// named (lower case, e.g. "evalsha"), added up, from INFO commandstats. A
// test counts calls before and after an operation to see how many reached
// the server, e.g. whether a client resent one.
func (s *Server) CommandCalls(ctx context.Context, names ...string) (int, error) {
	rdb := s.adminClient()
	defer rdb.Close()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("redistest: info commandstats on %s: %w", s.ep.addr, err)
	}
	n := 0
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		cmd, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat || !slices.Contains(names, cmd) {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, err := strconv.Atoi(calls)
		if err != nil {
			return 0, fmt.Errorf("redistest: info commandstats line %q: %w", line, err)
		}
		n += v
	}
	return n, nil
}
