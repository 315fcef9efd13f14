package netlab

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestTestCA(t *testing.T) {
	pemBytes := TestCAPEM()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatal("TestCAPEM holds no PEM block")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Subject.CommonName != "Lazaret test internet CA" || !ca.IsCA || ca.SerialNumber.Int64() != 1 ||
		!ca.NotBefore.Equal(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) || ca.NotAfter.Year() != 2099 {
		t.Errorf("CA certificate: CN %q, CA %v, serial %v, %v..%v", ca.Subject.CommonName, ca.IsCA, ca.SerialNumber, ca.NotBefore, ca.NotAfter)
	}
	// Golden: every process, and every Go release, computes these bytes.
	sum := sha256.Sum256(pemBytes)
	if got, want := hex.EncodeToString(sum[:]), testCAPEMSHA256; got != want {
		t.Errorf("TestCAPEM sha256 %s, want %s", got, want)
	}
}

const testCAPEMSHA256 = "50b1f7937240606b773136103494ae291f8ec7118616103925c59c35367d40a0"

func TestServerTLSConfig(t *testing.T) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(TestCAPEM())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	// Not StartTLS: it would add a certificate of its own for clients
	// that send no server name.
	srv.Listener = tls.NewListener(srv.Listener, ServerTLSConfig())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{DynamicName(InternetNamed[1], 60), true},
		{"cname." + DynamicName(InternetNamed[2], 5), true},
		{InternetName, true},
		{"other.test", false},
		{"", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{RootCAs: pool, ServerName: tc.name, InsecureSkipVerify: tc.name == ""})
			if err == nil {
				c.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("handshake: %v, want success %v", err, tc.ok)
			}
		})
	}
}

// ErrUnknownServerName must reach a handshake of an unserved name.
func TestUnknownServerNameError(t *testing.T) {
	_, err := ServerTLSConfig().GetCertificate(&tls.ClientHelloInfo{ServerName: "x.test", Conn: &net.TCPConn{}})
	if !errors.Is(err, ErrUnknownServerName) {
		t.Fatalf("err = %v", err)
	}
}
