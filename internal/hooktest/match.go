package hooktest

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// AnyScript matches a script call: EVAL or EVALSHA.
func AnyScript(cmd redis.Cmder) bool {
	n := strings.ToLower(cmd.Name())
	return n == "eval" || n == "evalsha"
}

// Script returns a matcher for the calls of one script, by any of texts:
// its sources and SHA1s (an EVAL carries the source, an EVALSHA the SHA1).
func Script(texts ...string) func(redis.Cmder) bool {
	return func(cmd redis.Cmder) bool {
		a := cmd.Args()
		if !AnyScript(cmd) || len(a) < 2 {
			return false
		}
		s := fmt.Sprint(a[1])
		for _, t := range texts {
			if s == t {
				return true
			}
		}
		return false
	}
}
