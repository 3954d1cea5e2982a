package redistest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

var tlsProbe struct {
	once sync.Once
	err  error
}

// TLSAvailable reports whether redis-server is on PATH and built with TLS.
// The first call runs redis-server once, with TLS options and missing
// certificate files: a TLS build rejects the files, a build without TLS
// rejects the options. Later calls return the same result. The error wraps
// [ErrNoTLS] when the build lacks TLS. It is safe for concurrent use.
func TLSAvailable() error {
	if err := Available(); err != nil {
		return err
	}
	tlsProbe.once.Do(func() { tlsProbe.err = probeTLS() })
	return tlsProbe.err
}

func probeTLS() error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const missing = "/nonexistent/redistest-probe.pem"
	cmd := exec.CommandContext(ctx, serverBin, "--bind", "127.0.0.1", "--port", "0",
		"--tls-port", fmt.Sprint(port), "--tls-cert-file", missing, "--tls-key-file", missing,
		"--tls-ca-cert-file", missing, "--tls-auth-clients", "no", "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = sysProcAttr()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	_ = cmd.Run() // it is meant to fail; its output says why
	if strings.Contains(out.String(), "Failed to configure TLS") {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNoTLS, strings.TrimSpace(out.String()))
}

// StartTLSServer starts a server that listens only on a TLS port, with a
// new CA and server certificate for 127.0.0.1 and localhost written to its
// directory (ca.crt, server.crt, server.key), and client certificates not
// required. It returns the server and a client config that trusts the CA;
// [Server.Options] and [Server.NewClient] already use it. cfg is as for
// [StartServer]; cfg.Port is the TLS port. It fails with an error wrapping
// [ErrNoTLS] when redis-server lacks TLS support.
func StartTLSServer(cfg Config) (*Server, *tls.Config, error) {
	if err := TLSAvailable(); err != nil {
		return nil, nil, err
	}
	files, client, err := newTLSFiles()
	if err != nil {
		return nil, nil, err
	}
	cfg.tlsFiles = files
	cfg.tlsClient = client
	s, err := StartServer(cfg)
	if err != nil {
		return nil, nil, err
	}
	return s, client.Clone(), nil
}
