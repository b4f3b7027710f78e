package mqtt_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/simnode"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// pki is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, as PEM files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		require.NoError(t, err)
		return der, k
	}
	marshal := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		return der
	}
	sDER, sKey := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	cDER, cKey := leaf(3, "robot-bridge", x509.ExtKeyUsageClientAuth, nil)
	return pki{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", sDER), serverKey: write("server.key", "EC PRIVATE KEY", marshal(sKey)),
		clientCert: write("client.pem", "CERTIFICATE", cDER), clientKey: write("client.key", "EC PRIVATE KEY", marshal(cKey)),
	}
}

// A broker that wants TLS with client certificates and a password: the
// driver and the simulated robot reach it with the config's options
// (password from a file for one, from the environment for the other), and
// a wrong password fails the start without the password in the error.
func TestDriver_TLSClientCertificateAndPasswordOnARealBroker(t *testing.T) {
	p := newPKI(t)
	passwd := mqtttest.PasswordFile(t, "bridge", "correct horse")
	m := mqtttest.StartBrokerWith(t, "cafile "+p.ca+"\ncertfile "+p.serverCert+"\nkeyfile "+p.serverKey+
		"\nrequire_certificate true\nallow_anonymous false\npassword_file "+passwd)
	pwFile := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pwFile, []byte("correct horse\n"), 0o600))

	cfg := mqttConfig(t, "ssl://127.0.0.1:"+strconv.Itoa(m.Port))
	mc := cfg.Transport.MQTT
	mc.Username, mc.PasswordFile, mc.CAFile, mc.CertFile, mc.KeyFile = "bridge", pwFile, p.ca, p.clientCert, p.clientKey
	require.NoError(t, cfg.Validate())

	robotCfg := cfg.Clone()
	robotCfg.Transport.MQTT.PasswordFile, robotCfg.Transport.MQTT.PasswordEnv = "", "ROBOT_PW"
	n, err := simnode.New(simnode.Conf{Config: robotCfg, Logger: quiet, Env: func(k string) string {
		if k == "ROBOT_PW" {
			return "correct horse"
		}
		return ""
	}})
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() { _ = n.Close() })

	d, err := mqtt.New(mqtt.Conf{Config: cfg, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Close() })
	rostest.Eventually(t, 10*time.Second, d.LinkUp, "no link over TLS")
	require.NoError(t, d.Send(context.Background(), baseCmd("tls-1", 0.2, 0)))

	// A wrong password: the broker refuses, Start says so in time, and
	// the password is nowhere in what it says.
	bad := cfg.Clone()
	badPW := filepath.Join(t.TempDir(), "bad")
	require.NoError(t, os.WriteFile(badPW, []byte("wrong-secret-pw"), 0o600))
	bad.Transport.MQTT.PasswordFile, bad.Transport.MQTT.ClientID = badPW, "bad-bridge"
	bd, err := mqtt.New(mqtt.Conf{Config: bad, Logger: quiet, ReadyTimeout: 2 * time.Second})
	require.NoError(t, err)
	err = bd.Start(context.Background())
	require.Error(t, err)
	require.NotContains(t, err.Error(), "wrong-secret-pw")
	require.Contains(t, err.Error(), "ssl://127.0.0.1:")

	// Without the client certificate the TLS handshake fails.
	nocert := cfg.Clone()
	nocert.Transport.MQTT.CertFile, nocert.Transport.MQTT.KeyFile, nocert.Transport.MQTT.ClientID = "", "", "nocert-bridge"
	nd, err := mqtt.New(mqtt.Conf{Config: nocert, Logger: quiet, ReadyTimeout: 2 * time.Second})
	require.NoError(t, err)
	require.Error(t, nd.Start(context.Background()))
}
