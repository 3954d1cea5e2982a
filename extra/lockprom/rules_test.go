package lockprom_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentlock/lock/internal/redistest"
)

// requireBinary returns the path of bin, skipping t when it is missing
// unless LOCK_REQUIRE_PROMETHEUS=1 or LOCK_REQUIRE_REDIS=1 (CI) make that a
// failure.
func requireBinary(t *testing.T, bin string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err == nil {
		return p
	}
	if os.Getenv("LOCK_REQUIRE_PROMETHEUS") == "1" || os.Getenv("LOCK_REQUIRE_REDIS") == "1" {
		t.Fatalf("%s not found (%v); install Debian's prometheus package", bin, err)
	}
	t.Skipf("%s not found (%v): install Debian's prometheus package to run this test", bin, err)
	return ""
}

// TestAlertRules runs alerts_test.yml, the unit tests of alerts.yml, with
// promtool.
func TestAlertRules(t *testing.T) {
	promtool := requireBinary(t, "promtool")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestPrometheusEndToEnd starts examples/metrics (on a real redis-server
// when there is one, else on its embedded Redis) and a real prometheus
// scraping it with alerts.yml loaded, then checks that every PromQL
// expression of dashboard.json and every recording rule of alerts.yml runs
// without error and returns data, and that every alerting rule evaluates
// without error (whether it fires depends on the load).
func TestPrometheusEndToEnd(t *testing.T) {
	prom := requireBinary(t, "prometheus")
	dir := t.TempDir()

	bin := filepath.Join(dir, "metrics")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/metrics").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/metrics: %v\n%s", err, out)
	}
	env := append(os.Environ(), "REDIS_ADDR=")
	if redistest.Available() == nil || os.Getenv("LOCK_REQUIRE_REDIS") == "1" {
		env = append(os.Environ(), "REDIS_ADDR="+redistest.Start(t, redistest.Config{}).Addr())
	}
	target := startExample(t, bin, env)

	port, err := redistest.FreePort()
	if err != nil {
		t.Fatalf("FreePort() error = %v", err)
	}
	rules, err := filepath.Abs("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: agentlock
    static_configs:
      - targets: [%q]
`, rules, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	api := "http://127.0.0.1:" + strconv.Itoa(port)
	startProcess(t, filepath.Join(dir, "prometheus.log"), prom, "--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:"+strconv.Itoa(port))

	var exprs []string
	for _, e := range dashboardExprs(t) {
		// Grafana's variables: every job, a window of a few scrapes.
		e = strings.NewReplacer("$__rate_interval", "15s", "$job", ".*").Replace(e)
		exprs = append(exprs, e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	alerts := 0
	for _, r := range waitRules(t, ctx, api) {
		if r.Type == "recording" {
			exprs = append(exprs, r.Query)
		} else {
			alerts++
			if _, err := query(ctx, api, r.Query); err != nil {
				t.Errorf("alert %s: %q: %v", r.Name, r.Query, err)
			}
		}
	}
	if alerts != 4 || len(exprs) < 12 {
		t.Fatalf("%d alerting rules and %d expressions, want 4 and the dashboard's and recording rules'", alerts, len(exprs))
	}
	start := time.Now()
	for _, e := range exprs {
		// Data comes once a few scrapes have been taken: ask until it does.
		for {
			n, err := query(ctx, api, e)
			if err != nil {
				t.Fatalf("%q: %v", e, err)
			}
			if n > 0 {
				t.Logf("%v: %s", time.Since(start).Round(time.Millisecond), e)
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%q returned no data within the test's time", e)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// startExample runs the example with env and returns the address it
// serves on.
func startExample(t *testing.T, bin string, env []string) string {
	t.Helper()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-workers", "16")
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("example's first line: %v", err)
	}
	u, err := url.Parse(strings.TrimPrefix(strings.TrimSpace(line), "serving "))
	if err != nil || u.Host == "" {
		t.Fatalf("example's first line %q: want its /metrics URL", line)
	}
	go io.Copy(io.Discard, out) // its final summary
	return u.Host
}

// startProcess runs name with args, its output in logPath, and stops it
// (by its pid) when t ends; the log is shown if t failed.
func startProcess(t *testing.T, logPath, name string, args ...string) {
	t.Helper()
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		lf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, b)
		}
	})
}

// dashboardExprs returns the expr of every target of dashboard.json.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Fatalf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// rule is one rule as Prometheus' /api/v1/rules reports it.
type rule struct {
	Name, Query, Type, Health, LastError string
	LastEvaluation                       time.Time
}

// waitRules returns the rules Prometheus loaded, once each has been
// evaluated; a rule whose evaluation failed fails t.
func waitRules(t *testing.T, ctx context.Context, api string) []rule {
	t.Helper()
	for {
		var resp struct {
			Data struct{ Groups []struct{ Rules []rule } }
		}
		err := getJSON(ctx, api+"/api/v1/rules", &resp)
		var rules []rule
		evaluated := err == nil
		for _, g := range resp.Data.Groups {
			for _, r := range g.Rules {
				if r.LastError != "" || r.Health == "err" {
					t.Fatalf("rule %s: %s", r.Name, r.LastError)
				}
				evaluated = evaluated && r.Health == "ok" && !r.LastEvaluation.IsZero()
				rules = append(rules, r)
			}
		}
		if evaluated && len(rules) > 0 {
			return rules
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rules not all evaluated in time (last error %v): %+v", err, rules)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// query runs an instant query and returns the number of series in its
// result; an error reply is an error.
func query(ctx context.Context, api, expr string) (int, error) {
	var resp struct {
		Status, Error string
		Data          struct{ Result []json.RawMessage }
	}
	if err := getJSON(ctx, api+"/api/v1/query?query="+url.QueryEscape(expr), &resp); err != nil {
		return 0, err
	}
	if resp.Status != "success" {
		return 0, fmt.Errorf("query failed: %s", resp.Error)
	}
	return len(resp.Data.Result), nil
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w (%.200s)", u, err, b)
	}
	return nil
}
