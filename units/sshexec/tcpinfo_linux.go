package sshexec

import (
	"time"

	"golang.org/x/sys/unix"
)

const haveTCPInfo = true

func readTCPInfo(fd uintptr) (tcpInfo, error) {
	ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return tcpInfo{}, err
	}
	return tcpInfo{
		probes:       int(ti.Probes),
		unacked:      int(ti.Unacked),
		sinceAck:     time.Duration(ti.Last_ack_recv) * time.Millisecond,
		sinceDataOut: time.Duration(ti.Last_data_sent) * time.Millisecond,
	}, nil
}
