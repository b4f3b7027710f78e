package bridge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/store"
)

func TestResolveCluster_RefusesWhatCannotWorkAndNamesIt(t *testing.T) {
	fleet := mqttTestConfig(t, func(c *hwconfig.Config) {
		c.Transport.MQTT.Broker, c.Transport.MQTT.Listen = "tcp://127.0.0.1:1883", ""
		c.Robot.ID = "amr"
		c.Fleet = &hwconfig.FleetConf{Count: 3}
	})
	embedded := mqttTestConfig(t, func(c *hwconfig.Config) { c.Transport.MQTT.Listen = "127.0.0.1:0" })
	none := func(string) string { return "" }
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name    string
		conf    ClusterConf
		env     func(string) string
		cfg     *hwconfig.Config
		drv     store.Driver
		wantErr string
		want    ClusterConf
		on      bool
	}{
		{name: "no bridge id: a bridge on its own", cfg: fleet, drv: store.DriverSQLite},
		{name: "cluster settings without an id", conf: ClusterConf{Failover: "auto"}, cfg: fleet, drv: store.DriverPostgres, wantErr: "no bridge id"},
		{name: "a bad id", conf: ClusterConf{BridgeID: "Bridge A"}, cfg: fleet, drv: store.DriverPostgres, wantErr: `bridge id "Bridge A" is not valid`},
		{name: "sqlite", conf: ClusterConf{BridgeID: "a"}, cfg: fleet, drv: store.DriverSQLite, wantErr: "needs the postgres store"},
		{name: "the embedded broker", conf: ClusterConf{BridgeID: "a"}, cfg: embedded, drv: store.DriverPostgres, wantErr: "transport.mqtt.broker set"},
		{name: "the in-process simulator", conf: ClusterConf{BridgeID: "a"}, cfg: testConfig(t, nil), drv: store.DriverPostgres, wantErr: "needs the mqtt transport"},
		{name: "an unknown robot claimed", conf: ClusterConf{BridgeID: "a", Claim: []string{"amr-9"}}, cfg: fleet, drv: store.DriverPostgres, wantErr: `claim names robot "amr-9"`},
		{name: "a robot claimed twice", conf: ClusterConf{BridgeID: "a", Claim: []string{"amr-1", "amr-1"}}, cfg: fleet, drv: store.DriverPostgres, wantErr: "twice"},
		{name: "an unknown policy", conf: ClusterConf{BridgeID: "a", Failover: "vote"}, cfg: fleet, drv: store.DriverPostgres, wantErr: `failover "vote" is not a policy`},
		{name: "a TTL too short", conf: ClusterConf{BridgeID: "a", LeaseTTL: 100 * time.Millisecond}, cfg: fleet, drv: store.DriverPostgres, wantErr: "outside"},
		{name: "a TTL that does not parse", env: env(map[string]string{EnvBridgeID: "a", EnvLeaseTTL: "soon"}), cfg: fleet, drv: store.DriverPostgres, wantErr: EnvLeaseTTL},
		{
			name: "the defaults", conf: ClusterConf{BridgeID: "a"}, cfg: fleet, drv: store.DriverPostgres, on: true,
			want: ClusterConf{BridgeID: "a", Failover: FailoverOperator, LeaseTTL: DefaultLeaseTTL},
		},
		{
			name: "everything from the environment",
			env:  env(map[string]string{EnvBridgeID: "b", EnvClaim: "amr-1, amr-3", EnvFailover: "auto", EnvLeaseTTL: "5s", EnvAdvertise: "http://b:8080"}),
			cfg:  fleet, drv: store.DriverPostgres, on: true,
			want: ClusterConf{BridgeID: "b", Claim: []string{"amr-1", "amr-3"}, Failover: FailoverAuto, LeaseTTL: 5 * time.Second, Advertise: "http://b:8080"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env
			if e == nil {
				e = none
			}
			got, on, err := resolveCluster(tc.conf, e, tc.cfg, tc.drv)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.False(t, on)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.on, on)
			if tc.on {
				require.Equal(t, tc.want, got)
			}
		})
	}
}
