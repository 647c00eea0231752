#!/usr/bin/env bash
# Makes the webhook's TLS certificate with openssl: a CA of its own and a
# server certificate for the Service's DNS names, signed by it.
#   deploy/kubernetes/make-cert.sh DIR [SERVICE [NAMESPACE]]
# (defaults gmt-webhook, gmt-system) writes DIR/ca.crt, ca.key, tls.crt,
# tls.key and prints the two steps that use them: the Secret the webhook
# mounts, and the caBundle line for webhook.yaml. GMT_CERT_EXTRA_SAN adds
# subjectAltNames (e.g. "IP:127.0.0.1" for a local test). Valid 825 days;
# run it again and re-apply both to rotate.
set -euo pipefail

dir=${1:?usage: make-cert.sh DIR [SERVICE [NAMESPACE]]}
svc=${2:-gmt-webhook}
ns=${3:-gmt-system}
command -v openssl >/dev/null || { echo "make-cert.sh: openssl not found (Debian: apt-get install openssl)" >&2; exit 2; }
mkdir -p "$dir"
umask 077

san="DNS:$svc,DNS:$svc.$ns,DNS:$svc.$ns.svc,DNS:$svc.$ns.svc.cluster.local"
[ -n "${GMT_CERT_EXTRA_SAN:-}" ] && san="$san,$GMT_CERT_EXTRA_SAN"

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 825 -subj "/CN=gmt-webhook-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$svc.$ns.svc" \
  -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
# Kubernetes checks subjectAltName only (never the CN).
printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' \
  "$san" >"$dir/tls.ext"
openssl x509 -req -sha256 -days 825 -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
  -CAcreateserial -extfile "$dir/tls.ext" -out "$dir/tls.crt" 2>/dev/null
rm -f "$dir/tls.csr" "$dir/tls.ext" "$dir/ca.srl"
chmod 0644 "$dir/ca.crt" "$dir/tls.crt"

echo "make-cert.sh: wrote $dir/{ca.crt,ca.key,tls.crt,tls.key} for $san"
echo "  kubectl -n $ns create secret tls $svc-tls --cert=$dir/tls.crt --key=$dir/tls.key"
echo "  caBundle for webhook.yaml:"
echo "      caBundle: $(base64 -w0 <"$dir/ca.crt")"
