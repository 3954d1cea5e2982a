package main

import (
	"context"
	"testing"

	"github.com/agentlock/lock/internal/redistest"
)

func TestVariants_acquireThenRelease(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.NewClient()
	defer rdb.Close()
	ctx := context.Background()
	for _, v := range variants() {
		for range 3 {
			if err := v.once(ctx, rdb); err != nil {
				t.Errorf("%s: %v", v.name, err)
			}
		}
	}
}
