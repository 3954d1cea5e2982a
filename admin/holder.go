package admin

import (
	"strconv"
	"strings"
	"time"
)

// Holder is one hold of a lock, as [Admin.Inspect] shows it. The fields
// but Token and TTL come from the holder info its acquire wrote (the lock
// package's WithHolderInfo, WithMetadata) and are zero without it.
type Holder struct {
	Token    string        // the hold's token; a re-entrant hold's own id ("owner#uuid")
	Owner    string        // the owner id of WithOwner; "" for none
	Fence    int64         // the hold's fence; 0 without fencing
	TTL      time.Duration // time left on the hold; -1 for a key without an expiry
	Host     string        // the holder's host name
	PID      int           // the holder's process id
	Since    time.Time     // when it was acquired, by the Redis server's clock
	Metadata string        // the text of WithMetadata
}

// infoSep separates the fields of a holder's info (ASCII unit separator).
const infoSep = "\x1f"

// parseHolder reads the holder info a hold wrote (see acquire.lua) into
// h: "fence US acquired-at-ms US owner US host US pid US metadata". Text
// it cannot read leaves the fields it names empty.
func parseHolder(h *Holder, info string) {
	f := strings.SplitN(info, infoSep, 6)
	if len(f) < 6 {
		return
	}
	h.Fence, _ = strconv.ParseInt(f[0], 10, 64)
	if ms, err := strconv.ParseInt(f[1], 10, 64); err == nil {
		h.Since = time.UnixMilli(ms)
	}
	h.Owner, h.Host, h.Metadata = f[2], f[3], f[5]
	h.PID, _ = strconv.Atoi(f[4])
}
