package lock

// Which option applies to which kind of lock. Every option either works on
// a kind or is refused there: given to the kind's constructor (NewLock,
// NewRWLock, NewSemaphore, NewMultiLock, Once and their With… forms), an
// option the kind cannot honour makes every verb of that lock return an
// error wrapping ErrInvalid that names the option and the kind; set on the
// Client, the same option is a default for the kinds it applies to, and
// the other kinds ignore it. optionRules is the one table that says which.

// optID names one option: the bit its With… function sets in
// config.given, so that a lock's constructor tells the options it was
// given from the Client's defaults.
type optID uint32

const (
	optTTL optID = 1 << iota
	optWatchdog
	optWaitTimeout
	optBackoff
	optNotify
	optReleaseMode
	optPrefix
	optOwner
	optObserver
	optLogger
	optMaxHold
	optFencing
	optCoalescing
	optReplicaAck
	optResultTTL
	optErrorTTL
	optFair
	optMetadata
	optHolderInfo
	optAudit
	optFallback
	optMaxWaiters
)

// optionRule is one option's row: the kinds it does not apply to, and for
// those, when a config asks for it and how a Client's default is dropped.
type optionRule struct {
	id   optID
	name string // the With… function
	// label names the option in errors: name, with the value that asks
	// for it when some values ask nothing (WithFair(false) asks no kind
	// for anything).
	label  string
	notFor kindSet
	asks   func(*config) bool // the config asks for the option; nil: any value given
	reset  func(*config)      // sets the value that asks nothing
}

// scriptOnly are the kinds whose every call is a script: they cannot run
// script-free, be re-entrant, or wait for replicas.
var scriptOnly = kinds(kindFair, kindRW, kindPermit, kindMulti, kindOnce, kindElection, kindLimiter)

// unheld are the kinds that hold nothing: a limiter's units are taken, not
// leased, so no option of a hold (its TTL, renewal, fence, holder info,
// audit, fallback) applies.
var unheld = kinds(kindLimiter)

// optionRules is every option, in the order of its bit. A kind not in an
// option's notFor supports it. The fallback and waiter-cap rows apply to
// every kind that holds.
var optionRules = [...]optionRule{
	{id: optTTL, name: "WithTTL", notFor: unheld, reset: func(c *config) { c.ttl = DefaultTTL }},
	{id: optWatchdog, name: "WithWatchdog", notFor: unheld, reset: func(c *config) { c.watchdog = true }},
	{id: optWaitTimeout, name: "WithWaitTimeout"},
	{
		// A limiter's Wait sleeps until its units are due: no backoff.
		id: optBackoff, name: "WithBackoff", notFor: unheld,
		reset: func(c *config) { c.backoffMin, c.backoffMax = DefaultBackoffMin, DefaultBackoffMax },
	},
	{
		id: optNotify, name: "WithNotify", label: "WithNotify(true)",
		// A multi-lock's waiter does not listen: one member's release says
		// nothing of the others.
		notFor: kinds(kindMulti),
		asks:   func(c *config) bool { return c.notify },
		reset:  func(c *config) { c.notify = false },
	},
	{
		id: optReleaseMode, name: "WithReleaseMode", label: "WithReleaseMode(ReleaseWatch)",
		notFor: kinds(kindReentrant) | scriptOnly,
		asks:   func(c *config) bool { return c.mode == ReleaseWatch },
		reset:  func(c *config) { c.mode = ReleaseScript },
	},
	{id: optPrefix, name: "WithPrefix"},
	{
		id: optOwner, name: "WithOwner",
		notFor: scriptOnly,
		asks:   func(c *config) bool { return c.ownerSet },
		reset:  func(c *config) { c.owner, c.ownerSet = "", false },
	},
	{id: optObserver, name: "WithObserver"},
	{
		// A limiter returns every failure to its caller: nothing to log.
		id: optLogger, name: "WithLogger", notFor: unheld,
		reset: func(c *config) { c.logger = nil },
	},
	{id: optMaxHold, name: "WithMaxHold", notFor: unheld, reset: func(c *config) { c.maxHold = 0 }},
	{
		// An election's terms are its fences; a limiter has none.
		// WithFencing(true) asks nothing of either.
		id: optFencing, name: "WithFencing", label: "WithFencing(false)",
		notFor: kinds(kindElection) | unheld,
		asks:   func(c *config) bool { return !c.fencing },
		reset:  func(c *config) { c.fencing = true },
	},
	{
		// An election's calls are few and go on their own, a limiter's
		// too. WithCoalescing(false) asks nothing of either.
		id: optCoalescing, name: "WithCoalescing", label: "WithCoalescing(true)",
		notFor: kinds(kindElection) | unheld,
		asks:   func(c *config) bool { return c.coalesce },
		reset:  func(c *config) { c.coalesce = false },
	},
	{
		id: optReplicaAck, name: "WithReplicaAck",
		notFor: scriptOnly,
		asks:   func(c *config) bool { return c.acks != 0 },
		reset:  func(c *config) { c.acks, c.ackTimeout = 0, 0 },
	},
	{
		id: optResultTTL, name: "WithResultTTL",
		notFor: kinds(kindMutex, kindReentrant, kindFair, kindRW, kindPermit, kindMulti, kindElection, kindLimiter),
		reset:  func(c *config) { c.resultTTL = DefaultResultTTL },
	},
	{
		id: optErrorTTL, name: "WithErrorTTL",
		notFor: kinds(kindMutex, kindReentrant, kindFair, kindRW, kindPermit, kindMulti, kindElection, kindLimiter),
		reset:  func(c *config) { c.errorTTL = 0 },
	},
	{
		id: optFair, name: "WithFair", label: "WithFair(true)",
		notFor: kinds(kindReentrant, kindRW, kindPermit, kindMulti, kindOnce, kindElection, kindLimiter),
		asks:   func(c *config) bool { return c.fair },
		reset:  func(c *config) { c.fair = false },
	},
	{
		// The fair lock's, the multi-lock's and the election's scripts
		// write no holder info, which is where the metadata goes.
		id: optMetadata, name: "WithMetadata",
		notFor: kinds(kindFair, kindMulti, kindElection, kindLimiter),
		asks:   func(c *config) bool { return c.metadata != "" },
		reset:  func(c *config) { c.metadata = "" },
	},
	{
		id: optHolderInfo, name: "WithHolderInfo", label: "WithHolderInfo(true)",
		notFor: kinds(kindFair, kindMulti, kindElection, kindLimiter),
		asks:   func(c *config) bool { return c.infoOn },
		reset:  func(c *config) { c.infoSet, c.infoOn = false, false },
	},
	{
		id: optAudit, name: "WithAudit", notFor: unheld,
		reset: func(c *config) { c.auditSet, c.audit, c.auditMax = false, "", 0 },
	},
	{
		// An in-process term would be a second leader; a limiter holds
		// nothing to fall back on. WithFallback(FallbackNone) asks nothing.
		id: optFallback, name: "WithFallback", label: "WithFallback(FallbackLocal)",
		notFor: kinds(kindElection) | unheld,
		asks:   func(c *config) bool { return c.fallback != FallbackNone },
		reset:  func(c *config) { c.fallback = FallbackNone },
	},
	{id: optMaxWaiters, name: "WithMaxWaiters", notFor: unheld, reset: func(c *config) { c.maxWaiters = 0 }},
}

// forKind fits cfg — the Client's defaults with a lock's options applied
// over them, config.given naming the lock's — to a lock of kind k: an
// option the lock was given that asks what k does not do is an error
// naming both; a Client default k does not use is dropped. given is
// cleared, so that locks of equal settings share them.
func (cfg *config) forKind(k lockKind) error {
	for i := range optionRules {
		r := &optionRules[i]
		if !r.notFor.has(k) || r.asks != nil && !r.asks(cfg) {
			continue
		}
		if cfg.given&r.id != 0 {
			return invalidf("%s does not apply to %s", r.labelText(), kindLabels[k])
		}
		r.reset(cfg)
	}
	cfg.given = 0
	return nil
}

func (r *optionRule) labelText() string {
	if r.label != "" {
		return r.label
	}
	return r.name
}

// mutexKind is the kind of the lock NewLock makes of cfg: an option the
// lock was given decides over the Client's defaults. A lock given both
// WithFair(true) and WithOwner is an error naming both.
func (cfg *config) mutexKind() (lockKind, error) {
	fair, owner := cfg.given&optFair != 0 && cfg.fair, cfg.given&optOwner != 0
	switch {
	case fair && owner:
		return 0, invalidf("WithFair(true) and WithOwner: %s cannot be %s", kindLabels[kindFair], kindLabels[kindReentrant])
	case fair:
		return kindFair, nil
	case owner:
		return kindReentrant, nil
	case cfg.fair:
		return kindFair, nil
	case cfg.ownerSet:
		return kindReentrant, nil
	}
	return kindMutex, nil
}

// forMutex is forKind for the lock NewLock makes of cfg.
func (cfg *config) forMutex() error {
	k, err := cfg.mutexKind()
	if err != nil {
		return err
	}
	return cfg.forKind(k)
}

// kindConfig returns the configuration of a lock of kind k made with opts
// over c's defaults, or the error, wrapping ErrInvalid, of options that are
// invalid or that k does not take. c was made by NewClient.
func (c *Client) kindConfig(k lockKind, opts []Option) (config, error) {
	if c.err != nil {
		return config{}, c.err
	}
	cfg := c.cfg.with(opts)
	if err := cfg.forKind(k); err != nil {
		return config{}, err
	}
	return cfg, cfg.validate()
}
