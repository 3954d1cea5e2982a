package main

import (
	"strings"
	"testing"
)

func TestWithBefore_addsBesideAgentlockOnOneNode(t *testing.T) {
	impls := []impl{floorImpl(), agentlockImpl("agentlock")}
	if got := withBefore(impls, 1); len(got) != 2 {
		t.Fatalf("without ab.sh: %d impls, want the 2 given", len(got))
	}
	beforeImpl = &impl{name: beforeName}
	defer func() { beforeImpl = nil }()
	got := withBefore(impls, 1)
	if len(got) != 3 || got[2].name != beforeName {
		t.Fatalf("with ab.sh, one node: %d impls, want agentlock's two and %s last", len(got), beforeName)
	}
	if len(impls) != 2 {
		t.Fatal("withBefore changed its argument's length")
	}
	if got := withBefore(impls, 3); len(got) != 2 {
		t.Fatalf("three nodes: %d impls, want none added", len(got))
	}
	if got := withBefore([]impl{floorImpl()}, 1); len(got) != 1 {
		t.Fatalf("no agentlock: %d impls, want none added", len(got))
	}
}

func TestPrintAB_perRoundRatios(t *testing.T) {
	tb := newTable("S2", "x", "floor", column{Key: "ops", Ratio: true}, column{Key: "errs"})
	for _, r := range []struct{ a, b num }{{90, 100}, {120, 100}, {95, 100}} {
		tb.row("agentlock").Rounds = append(tb.row("agentlock").Rounds, map[string]num{"ops": r.a})
		tb.row(beforeName).Rounds = append(tb.row(beforeName).Rounds, map[string]num{"ops": r.b})
	}
	var b strings.Builder
	printAB(&b, []*table{tb, newTable("S1", "y", "floor")})
	out := b.String()
	if !strings.Contains(out, "ops 0.950 (higher in 1 of 3)") || strings.Contains(out, "errs") || strings.Contains(out, "S1") {
		t.Fatalf("printAB wrote %q; want S2's ops at 0.950, higher in 1 of 3, and nothing else", out)
	}
}
