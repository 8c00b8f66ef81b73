# rabbitmq_defs.sh — sourced: rabbit_defs FILE writes the definitions the
# rabbitmq tests start their node with: user relay (password s3cr3t) on
# vhost /, the durable topic exchange "pgo" and its durable queues:
#   q.orders   classic, routing key orders
#   q.users    quorum, routing key users
#   q.small    classic, x-max-length 5 and x-overflow reject-publish: small
#   q.ce       classic, routing key ce (CloudEvents)
#   q.sac      quorum, x-single-active-consumer: ordered
# Nothing is bound for any other routing key.
rabbit_defs() {
	local hash
	hash=$(rabbit_pw_hash s3cr3t)
	python3 - "$1" "$hash" <<'PY'
import json, sys
path, pw = sys.argv[1], sys.argv[2]
def q(name, args):
    return {"name": name, "vhost": "/", "durable": True, "auto_delete": False, "arguments": args}
def b(queue, key):
    return {"source": "pgo", "vhost": "/", "destination": queue, "destination_type": "queue", "routing_key": key, "arguments": {}}
json.dump({
    "users": [{"name": "relay", "password_hash": pw,
               "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"]}],
    "vhosts": [{"name": "/"}],
    "permissions": [{"user": "relay", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}],
    "exchanges": [{"name": "pgo", "vhost": "/", "type": "topic", "durable": True,
                   "auto_delete": False, "internal": False, "arguments": {}}],
    "queues": [q("q.orders", {}), q("q.users", {"x-queue-type": "quorum"}),
               q("q.small", {"x-max-length": 5, "x-overflow": "reject-publish"}),
               q("q.ce", {}),
               q("q.sac", {"x-queue-type": "quorum", "x-single-active-consumer": True})],
    "bindings": [b("q.orders", "orders"), b("q.users", "users"), b("q.small", "small"),
                 b("q.ce", "ce"), b("q.sac", "ordered")],
}, open(path, "w"), indent=1)
PY
}
