//go:build !linux

package sshexec

import "errors"

const haveTCPInfo = false

func readTCPInfo(uintptr) (tcpInfo, error) { return tcpInfo{}, errors.New("no TCP_INFO here") }
