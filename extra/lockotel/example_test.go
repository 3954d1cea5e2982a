package lockotel_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/extra/lockotel"
)

func ExampleNewObserver() {
	m, _ := miniredis.Run() // your Redis here
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	reader := sdkmetric.NewManualReader() // your exporter's reader here
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := lockotel.NewObserver(lockotel.WithMeterProvider(mp)) // spans: the global TracerProvider
	if err != nil {
		fmt.Println(err)
		return
	}
	locks := lock.NewClient(rdb, lock.WithObserver(obs))
	defer locks.Close()
	if err := locks.WithLock(context.Background(), "report:today", func(context.Context) error { return nil }); err != nil {
		fmt.Println(err)
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "agentlock.acquires" {
			fmt.Println(m.Name, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
		}
	}
	// Output: agentlock.acquires 1
}
