package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/admin"
)

// connTimeout bounds the first PING.
const connTimeout = 5 * time.Second

// connect opens the Redis client the flags name and checks it with a PING.
func connect(ctx context.Context, g *globals) (redis.UniversalClient, error) {
	rdb, err := newRedis(g)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, connTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("connect %s: %w", g.where(), err)
	}
	return rdb, nil
}

func (g *globals) where() string {
	if g.cluster != "" {
		return "cluster " + g.seeds()
	}
	return g.addr
}

// seeds returns the cluster's seed list: --cluster, or -addr for "1"/"true".
func (g *globals) seeds() string {
	switch strings.ToLower(g.cluster) {
	case "1", "true", "yes":
		return g.addr
	}
	return g.cluster
}

func newRedis(g *globals) (redis.UniversalClient, error) {
	if g.cluster == "" {
		opt, err := parseAddr(g.addr)
		if err != nil {
			return nil, err
		}
		if g.noRetry {
			opt.MaxRetries = -1
		}
		return redis.NewClient(opt), nil
	}
	copt := &redis.ClusterOptions{}
	if g.noRetry {
		copt.MaxRetries = -1
	}
	for _, s := range strings.Split(g.seeds(), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		opt, err := parseAddr(s)
		if err != nil {
			return nil, err
		}
		copt.Addrs = append(copt.Addrs, opt.Addr)
		copt.Username, copt.Password, copt.TLSConfig = opt.Username, opt.Password, opt.TLSConfig
	}
	if len(copt.Addrs) == 0 {
		return nil, usagef("--cluster: no seed address")
	}
	return redis.NewClusterClient(copt), nil
}

// parseAddr reads a redis:// or rediss:// URL or a host:port.
func parseAddr(s string) (*redis.Options, error) {
	if strings.Contains(s, "://") {
		opt, err := redis.ParseURL(s)
		if err != nil {
			return nil, usagef("address %q: %v", s, err)
		}
		return opt, nil
	}
	if s == "" || !strings.Contains(s, ":") {
		return nil, usagef("address %q: want host:port or a redis:// URL", s)
	}
	return &redis.Options{Addr: s}, nil
}

// open connects and returns an Admin over the connection, and a function
// that closes it.
func open(ctx context.Context, g *globals, opts ...admin.Option) (*admin.Admin, func(), error) {
	rdb, err := connect(ctx, g)
	if err != nil {
		return nil, nil, err
	}
	a := admin.New(rdb, append([]admin.Option{admin.WithPrefix(g.prefix)}, opts...)...)
	return a, func() { _ = rdb.Close() }, nil
}

// quietLogger drops go-redis's own log lines (a pool's failed dials), so
// that a connection error is reported once, by lockctl.
type quietLogger struct{}

// Printf drops the line.
func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLogger{}) }
