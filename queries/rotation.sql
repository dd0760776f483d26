-- name: CountLocalIdentityRows :one
SELECT count(*) FROM local_identity;

-- name: CountIdentityPinRows :one
SELECT count(*) FROM identity_pin;

-- name: CountSessionRows :one
SELECT count(*) FROM session;

-- name: CountSessionInitiationRows :one
SELECT count(*) FROM session_initiation;

-- name: CountPendingInboundRows :one
SELECT count(*) FROM pending_inbound_message;
