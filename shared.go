package lock

import "sync"

// Locks made with the same options share one settings (a config and a
// Policy, about 500 bytes), as locks made with none share the Client's:
// callers pass the same few options over and over
// (`NewLock(key, WithTTL(10*time.Second))` per request), settings are
// immutable once filled, and what a lock keeps of its own lives on the Lock
// and the Client.

// sharedSettings keeps the settings of the option sets a Client's locks
// were made with, by their config. At most maxShared are kept: a caller
// whose options differ on every call (a metadata per request) empties it
// every maxShared calls, and so gets one settings per lock.
type sharedSettings struct {
	mu sync.Mutex
	m  map[config]*settings
}

// maxShared bounds sharedSettings.
const maxShared = 64

// unsetObserver marks, while a lock's options are applied, that none of
// them set an Observer: the lock then has the Client's, and its config can
// key the shared settings (an Observer may be of a type == cannot compare,
// so a config carrying one never is a key).
type unsetObserver struct{}

func (unsetObserver) Observe(Event) {}

// configPool holds the scratch configs options are applied to: an option
// is a func(*config), so a config it is applied to lives on the heap.
var configPool = sync.Pool{New: func() any { return new(config) }}

// lockSettings returns the settings of c's options overridden by opts, or
// the error of an invalid one.
func (c *Client) lockSettings(opts []Option) (*settings, error) {
	cfg := configPool.Get().(*config)
	defer func() {
		*cfg = config{} // keep no Observer or Logger alive
		configPool.Put(cfg)
	}()
	*cfg = c.cfg
	cfg.observer = unsetObserver{}
	for _, o := range opts {
		if o != nil {
			o(cfg)
		}
	}
	if err := cfg.forMutex(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.observer != Observer(unsetObserver{}) {
		return c.settings(*cfg), nil // an Observer of its own: not shared
	}
	cfg.observer = nil // the key: the Client's Observer
	sh := &c.shared
	sh.mu.Lock()
	s := sh.m[*cfg]
	sh.mu.Unlock()
	if s != nil {
		return s, nil
	}
	key := *cfg
	cfg.observer = c.cfg.observer
	s = c.settings(*cfg)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if prev := sh.m[key]; prev != nil {
		return prev, nil
	}
	if sh.m == nil || len(sh.m) >= maxShared {
		sh.m = make(map[config]*settings)
	}
	sh.m[key] = s
	return s, nil
}
