#!/usr/bin/env python3
# herd-lab-nfq.py DELAY_MS JITTER_MS QUEUE: the lab's userspace packet
# delayer (scripts/lab.d/netem.sh runs it inside a board's netns when the
# kernel has no sch_netem). It speaks nfnetlink_queue directly (no
# library): binds the queue in copy-meta mode, reads packet ids and gives
# each an NF_ACCEPT verdict once its delay has passed. Its file name is the
# mark netem.sh finds it by.
import heapq, os, random, select, signal, socket, struct, sys, time
delay = float(sys.argv[1]) / 1000.0
jitter = float(sys.argv[2]) / 1000.0
qnum = int(sys.argv[3])
SUBSYS = 3  # NFNL_SUBSYS_QUEUE
PACKET, VERDICT, CONFIG = 0, 1, 2
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((0, 0))
seq = 0
def attr(t, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, t) + payload + b"\0" * ((4 - n % 4) % 4)
def send(msg, attrs, flags=1):
    global seq
    seq += 1
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(qnum)) + b"".join(attrs)
    s.send(struct.pack("=IHHII", 16 + len(body), (SUBSYS << 8) | msg, flags, seq, 0) + body)
def config(attrs):
    send(CONFIG, attrs, 1 | 4)  # NLM_F_REQUEST | NLM_F_ACK
    data = s.recv(65536)
    if struct.unpack_from("=H", data, 4)[0] == 2:  # NLMSG_ERROR
        err = struct.unpack_from("=i", data, 16)[0]
        if err:
            sys.exit("nfqueue config: " + os.strerror(-err))
config([attr(1, struct.pack("=BxH", 1, socket.htons(socket.AF_INET)))])  # NFQA_CFG_CMD: BIND
config([attr(2, struct.pack("!IB", 0, 1)), attr(3, struct.pack("!I", 8192))])  # COPY_META, QUEUE_MAXLEN
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("ready", flush=True)
pending = []
while True:
    timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else None
    if select.select([s], [], [], timeout)[0]:
        try:
            data = s.recv(1 << 16)
        except OSError:  # ENOBUFS: the kernel dropped some (lost packets)
            data = b""
        off = 0
        while off + 16 <= len(data):
            n, t = struct.unpack_from("=IH", data, off)
            if n < 16:
                break
            if t == (SUBSYS << 8) | PACKET:
                a = off + 20
                while a + 4 <= off + n:
                    an, at = struct.unpack_from("=HH", data, a)
                    if an < 4:
                        break
                    if at & 0x7FFF == 1:  # NFQA_PACKET_HDR: packet id first
                        pid = struct.unpack_from("!I", data, a + 4)[0]
                        d = delay + (random.uniform(-jitter, jitter) if jitter else 0.0)
                        heapq.heappush(pending, (time.monotonic() + max(0.0, d), pid))
                        break
                    a += (an + 3) & ~3
            off += (n + 3) & ~3
    now = time.monotonic()
    while pending and pending[0][0] <= now:
        pid = heapq.heappop(pending)[1]
        send(VERDICT, [attr(2, struct.pack("!II", 1, pid))])  # NFQA_VERDICT_HDR: NF_ACCEPT
