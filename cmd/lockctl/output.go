package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentlock/lock/admin"
)

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...any) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(fmt.Sprint(c))
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fmtTTL shows a holder's TTL, to the millisecond.
func fmtTTL(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return d.Round(time.Millisecond).String()
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// jsonInfo is lock.Info as --json prints it.
type jsonInfo struct {
	Key     string       `json:"key"`
	Kind    string       `json:"kind"`
	Fence   int64        `json:"fence"`
	Waiters int          `json:"waiters"`
	Holders []jsonHolder `json:"holders"`
}

type jsonHolder struct {
	Token    string `json:"token"`
	Owner    string `json:"owner,omitempty"`
	Fence    int64  `json:"fence"`
	TTLMs    int64  `json:"ttl_ms"` // -1: no expiry
	Host     string `json:"host,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Since    string `json:"since,omitempty"` // RFC 3339, the server's clock
	Metadata string `json:"metadata,omitempty"`
}

func infoJSON(info *admin.Info) jsonInfo {
	j := jsonInfo{Key: info.Key, Kind: info.Kind, Fence: info.Fence, Waiters: info.Waiters, Holders: []jsonHolder{}}
	for _, h := range info.Holders {
		jh := jsonHolder{Token: h.Token, Owner: h.Owner, Fence: h.Fence, TTLMs: h.TTL.Milliseconds(),
			Host: h.Host, PID: h.PID, Metadata: h.Metadata}
		if h.TTL < 0 {
			jh.TTLMs = -1
		}
		if !h.Since.IsZero() {
			jh.Since = h.Since.UTC().Format(time.RFC3339Nano)
		}
		j.Holders = append(j.Holders, jh)
	}
	return j
}

// printInfo prints one lock for people.
func printInfo(w io.Writer, info *admin.Info) error {
	fmt.Fprintf(w, "key:      %s\nkind:     %s\nfence:    %d\nwaiters:  %d\nholders:  %d\n",
		info.Key, info.Kind, info.Fence, info.Waiters, len(info.Holders))
	if len(info.Holders) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "TOKEN", "OWNER", "FENCE", "TTL", "HOST", "PID", "SINCE", "METADATA")
	for _, h := range info.Holders {
		since, pid := "-", "-"
		if !h.Since.IsZero() {
			since = h.Since.UTC().Format(time.RFC3339)
		}
		if h.PID != 0 {
			pid = fmt.Sprint(h.PID)
		}
		t.row(h.Token, orDash(h.Owner), h.Fence, fmtTTL(h.TTL), orDash(h.Host), pid, since, orDash(h.Metadata))
	}
	return t.flush()
}
