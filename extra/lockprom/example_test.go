package lockprom_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/extra/lockprom"
)

func ExampleNewCollector() {
	m, _ := miniredis.Run() // your Redis here
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	col := lockprom.NewCollector(lockprom.WithKeyGroup(lockprom.PrefixGroup, 100))
	reg := prometheus.NewRegistry() // or prometheus.MustRegister(col)
	reg.MustRegister(col)
	locks := lock.NewClient(rdb, lock.WithObserver(col))
	defer locks.Close()

	for _, id := range []string{"1", "2"} {
		if err := locks.WithLock(context.Background(), "session:"+id, func(context.Context) error { return nil }); err != nil {
			fmt.Println(err)
		}
	}
	// Serve reg with promhttp.HandlerFor; here, read one series back.
	n, err := testutil.GatherAndCount(reg, "agentlock_hold_seconds")
	fmt.Println(n, err)
	// Output: 1 <nil>
}
