package lock

import "context"

// ForceReleaseToken runs admin's ForceReleaseToken with c's prefix, audit
// stream and bounded calls, as an operator's Admin over c's client does.
func ForceReleaseToken(c *Client, ctx context.Context, key, token string) error {
	a, err := c.admin(opForceRelease, key)
	if err != nil {
		return err
	}
	return a.ForceReleaseToken(ctx, key, token)
}
