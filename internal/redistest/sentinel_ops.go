package redistest

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// CurrentMaster returns the master's address as the first running sentinel
// that answers SENTINEL get-master-addr-by-name reports it. It fails when
// no sentinel answers.
func (sn *Sentinel) CurrentMaster(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range sn.sentinels {
		if !s.Running() {
			continue
		}
		addr, err := askMaster(ctx, s)
		if err == nil {
			return addr, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("redistest: current master: %w", errors.Join(append(errs, errors.New("no sentinel answered"))...))
}

// askMaster returns the master's address according to sentinel s.
func askMaster(ctx context.Context, s *Server) (string, error) {
	rdb := redis.NewSentinelClient(s.adminOptions())
	defer rdb.Close()
	m, err := rdb.GetMasterAddrByName(ctx, masterName).Result()
	if err != nil {
		return "", fmt.Errorf("redistest: sentinel %s: get-master-addr-by-name: %w", s.Addr(), err)
	}
	return hostPortOf(m), nil
}

// KillMasterAndWaitFailover SIGKILLs the current master and waits until
// every running sentinel names the same new master and that server reports
// role:master. It returns the new master's address, and fails when ctx
// ends; give ctx a deadline. With down-after-milliseconds 1000 a failover
// takes a few seconds. The old master stays killed; after
// [Server.Restart] the sentinels make it a replica.
func (sn *Sentinel) KillMasterAndWaitFailover(ctx context.Context) (string, error) {
	old, err := sn.CurrentMaster(ctx)
	if err != nil {
		return "", err
	}
	dead := sn.byAddr(old)
	if dead == nil {
		return "", fmt.Errorf("redistest: failover: master %s is not one of ours", old)
	}
	dead.Kill()
	var promoted string
	err = poll(ctx, "wait for failover of "+old, func(ctx context.Context) error {
		agreed := ""
		for _, s := range sn.sentinels {
			if !s.Running() {
				continue
			}
			addr, err := askMaster(ctx, s)
			if err != nil {
				return err
			}
			if addr == old || (agreed != "" && addr != agreed) {
				return fmt.Errorf("redistest: sentinel %s names master %s", s.Addr(), addr)
			}
			agreed = addr
		}
		m := sn.byAddr(agreed)
		if m == nil {
			return fmt.Errorf("redistest: sentinels name unknown master %q", agreed)
		}
		if err := m.isMaster(ctx); err != nil {
			return err
		}
		promoted = agreed
		return nil
	})
	if err != nil {
		return "", err
	}
	return promoted, nil
}

// isMaster returns nil when the server reports role:master.
func (s *Server) isMaster(ctx context.Context) error {
	rdb := s.adminClient()
	defer rdb.Close()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("redistest: info replication on %s: %w", s.Addr(), err)
	}
	if v, _ := infoField(info, "role"); v != "master" {
		return fmt.Errorf("redistest: %s has role:%s", s.Addr(), v)
	}
	return nil
}

// byAddr returns the master or replica at addr, or nil.
func (sn *Sentinel) byAddr(addr string) *Server {
	for _, s := range append([]*Server{sn.master}, sn.replicas...) {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}
