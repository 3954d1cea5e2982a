package redistest

import (
	"errors"
	"sync"
)

// startMany starts n servers at once, server i as cfg(i) describes. If any
// fails it stops those that started and returns every error.
func startMany(n int, cfg func(i int) Config) ([]*Server, error) {
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = StartServer(cfg(i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopAll(servers)
		return nil, err
	}
	return servers, nil
}

// stopAll stops the non-nil servers at once and waits for them all.
func stopAll(servers []*Server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		if s != nil {
			wg.Go(s.Stop)
		}
	}
	wg.Wait()
}
