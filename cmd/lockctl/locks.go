package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/admin"
)

// cmdList prints every lock matching the pattern.
func cmdList(ctx context.Context, g *globals, args []string, stdout, stderr io.Writer) error {
	pos, err := parse(flag.NewFlagSet("list", flag.ContinueOnError), g, args, stderr)
	if err != nil {
		return err
	}
	if err := wantArgs("list", pos, 0, 1, "[PATTERN]"); err != nil {
		return err
	}
	pattern := ""
	if len(pos) == 1 {
		pattern = pos[0]
	}
	c, done, err := open(ctx, g)
	if err != nil {
		return err
	}
	defer done()
	var tw *table
	if !g.json {
		tw = newTable(stdout, "KEY", "KIND", "HOLDERS", "WAITERS", "FENCE", "OWNER", "TTL")
	}
	var firstErr error
	for info, err := range c.List(ctx, pattern) {
		if err == nil {
			info.Waiters, err = waiters(ctx, c, &info)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			fmt.Fprintf(stderr, "lockctl: %v\n", err)
			continue
		}
		if g.json {
			if err := writeJSON(stdout, infoJSON(&info)); err != nil {
				return err
			}
			continue
		}
		owner, ttl := "-", "-"
		if len(info.Holders) > 0 {
			h := info.Holders[0]
			owner, ttl = orDash(h.Owner), fmtTTL(h.TTL)
		}
		tw.row(info.Key, info.Kind, len(info.Holders), info.Waiters, info.Fence, owner, ttl)
	}
	if tw != nil {
		if err := tw.flush(); err != nil {
			return err
		}
	}
	if firstErr != nil {
		return fmt.Errorf("list incomplete: %w", firstErr)
	}
	return nil
}

// cmdInspect prints one lock.
func cmdInspect(ctx context.Context, g *globals, args []string, stdout, stderr io.Writer) error {
	pos, err := parse(flag.NewFlagSet("inspect", flag.ContinueOnError), g, args, stderr)
	if err != nil {
		return err
	}
	if err := wantArgs("inspect", pos, 1, 1, "KEY"); err != nil {
		return err
	}
	c, done, err := open(ctx, g)
	if err != nil {
		return err
	}
	defer done()
	info, err := c.Inspect(ctx, pos[0])
	if err == nil && info.Kind != "" {
		info.Waiters, err = waiters(ctx, c, &info)
	}
	if err != nil {
		return err
	}
	if g.json {
		// A free key too: {"key":…,"kind":"","holders":[]}, and exit 1.
		if err := writeJSON(stdout, infoJSON(&info)); err != nil {
			return err
		}
	}
	if info.Kind == "" {
		return fmt.Errorf("%q: %w", pos[0], errNotFound)
	}
	if g.json {
		return nil
	}
	return printInfo(stdout, &info)
}

// cmdRelease force-releases a key, or one hold of it.
func cmdRelease(ctx context.Context, g *globals, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	force := fs.Bool("force", false, "really free the lock, whoever holds it")
	token := fs.String("token", "", "remove only the hold with this token")
	stream := fs.String("stream", "", "record the force-release on this audit stream (default PREFIX+\"audit\" when it exists)")
	pos, err := parse(fs, g, args, stderr)
	if err != nil {
		return err
	}
	if err := wantArgs("release", pos, 1, 1, "--force [--token T] KEY"); err != nil {
		return err
	}
	if !*force {
		return usagef("release refused without --force: it frees %q whoever holds it, and the holder loses it at once", pos[0])
	}
	// Given, --token names one hold: an empty one names none (it must not
	// fall back to freeing every holder).
	byToken := flagGiven(fs, "token")
	if byToken && strings.TrimSpace(*token) == "" {
		return usagef("release --token: empty token (leave --token out to free every holder of %q)", pos[0])
	}
	rdb, err := connect(ctx, g)
	if err != nil {
		return err
	}
	defer rdb.Close()
	opts := []admin.Option{admin.WithPrefix(g.prefix)}
	if name := auditStream(ctx, rdb, g, *stream); name != "" {
		opts = append(opts, admin.WithAudit(name, auditMaxLen))
	}
	c := admin.New(rdb, opts...)
	if byToken {
		err = releaseToken(ctx, c, pos[0], *token)
	} else {
		err = c.ForceRelease(ctx, pos[0])
	}
	if err != nil {
		return err
	}
	if g.json {
		return writeJSON(stdout, map[string]any{"key": pos[0], "token": *token, "released": true})
	}
	if byToken {
		_, err = fmt.Fprintf(stdout, "released %s (token %s)\n", pos[0], *token)
	} else {
		_, err = fmt.Fprintf(stdout, "released %s\n", pos[0])
	}
	return err
}

// releaseToken force-releases the hold of key with token. When none has
// it, the error says whether key is free (not held) or held by others (no
// hold with token), both wrapping [lock.ErrNotHeld].
func releaseToken(ctx context.Context, c *admin.Admin, key, token string) error {
	err := c.ForceReleaseToken(ctx, key, token)
	if !errors.Is(err, lock.ErrNotHeld) {
		return err
	}
	info, ierr := c.Inspect(ctx, key)
	if ierr != nil || len(info.Holders) == 0 {
		return err
	}
	return noHoldError{token: token, key: key}
}

// noHoldError is a release --token of a key held, but not by token: exit 1.
type noHoldError struct{ token, key string }

func (e noHoldError) Error() string {
	return fmt.Sprintf("no hold with token %s on %s", e.token, e.key)
}

func (e noHoldError) Unwrap() error { return lock.ErrNotHeld }

// flagGiven reports whether the command line set the flag name of fs.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// waiters returns what the WAITERS column shows of info: a fair lock's
// queued Acquires, else the Clients listening on the key's notify channel
// for its release (one per process, however many of its Acquires wait).
func waiters(ctx context.Context, a *admin.Admin, info *admin.Info) (int, error) {
	if info.Waiters > 0 {
		return info.Waiters, nil
	}
	return a.Listeners(ctx, info.Key)
}
