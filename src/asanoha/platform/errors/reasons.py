"""The catalogue of error reasons: stable, machine-readable, translated in ``i18n/``."""

from enum import StrEnum


class Reasons(StrEnum):
    """Why a call failed. Every member has an entry in ``i18n/en.yaml`` and ``i18n/de.yaml``."""

    # 400
    VALIDATION_FAILED = "validation_failed"
    MALFORMED_JSON = "malformed_json"
    JSON_TOO_DEEP = "json_too_deep"
    IDEMPOTENCY_KEY_INVALID = "idempotency_key_invalid"
    IDEMPOTENCY_KEY_ANONYMOUS = "idempotency_key_anonymous"
    READ_AFTER_INVALID = "read_after_invalid"
    # 401
    TOKEN_MISSING = "token_missing"
    TOKEN_EXPIRED = "token_expired"
    TOKEN_INVALID = "token_invalid"
    # 403
    ROLE_REQUIRED = "role_required"
    INSTRUCTION_FIELD_WRITE_REQUIRES_HIGH_RISK = "instruction_field_write_requires_high_risk"
    IRREVERSIBLE_OPERATION_REQUIRES_HIGH_RISK = "irreversible_operation_requires_high_risk"
    PUBLIC_INTAKE_REQUIRED = "public_intake_required"
    WRITE_IN_QUERY_DENIED = "write_in_query_denied"
    IDENTITY_SWITCH_DENIED = "identity_switch_denied"
    SYSTEM_IDENTITY_SWITCH_DENIED = "system_identity_switch_denied"
    EVENT_APPEND_DENIED = "event_append_denied"
    OPERATOR_REQUIRED = "operator_required"
    RAW_SQL_NOT_DECLARED = "raw_sql_not_declared"
    RAW_SQL_REFUSED = "raw_sql_refused"
    FIELD_READ_DENIED = "field_read_denied"
    FIELD_WRITE_DENIED = "field_write_denied"
    OWNER_FIELD_WRITE_DENIED = "owner_field_write_denied"
    IDEMPOTENCY_KEY_OTHER_ACCESS = "idempotency_key_other_access"
    # 404
    HANDLER_NOT_FOUND = "handler_not_found"
    ENTITY_NOT_FOUND = "entity_not_found"
    JOB_NOT_FOUND = "job_not_found"
    CONSUMER_NOT_FOUND = "consumer_not_found"
    CONSUMER_PARTITION_NOT_FOUND = "consumer_partition_not_found"
    JOB_ROW_NOT_FOUND = "job_row_not_found"
    # 409
    VERSION_CONFLICT = "version_conflict"
    UNIQUE_VIOLATION = "unique_violation"
    ENTITY_DELETED = "entity_deleted"
    ENTITY_NOT_DELETED = "entity_not_deleted"
    CONSUMER_NOT_STOPPED = "consumer_not_stopped"
    CONSUMER_STOPPED = "consumer_stopped"
    JOB_NOT_FAILED = "job_not_failed"
    JOB_NOT_CANCELLABLE = "job_not_cancellable"
    JOB_KEY_TAKEN = "job_key_taken"
    TRANSACTION_CONFLICT = "transaction_conflict"
    IDEMPOTENCY_IN_PROGRESS = "idempotency_in_progress"
    PROJECTION_ORPHAN_ROWS = "projection_orphan_rows"
    SUBJECT_KEY_EXISTS = "subject_key_exists"
    # 413
    PAYLOAD_TOO_LARGE = "payload_too_large"
    BATCH_TOO_LARGE = "batch_too_large"
    # 422
    UNPROCESSABLE = "unprocessable"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    INVALID_TRANSITION = "invalid_transition"
    JOB_NOT_MANUAL = "job_not_manual"
    # 429
    RATE_LIMITED = "rate_limited"
    # 500
    INTERNAL_ERROR = "internal_error"
    PRE_SAVE_HOOK_FAILED = "pre_save_hook_failed"
    # 503
    DEPENDENCY_UNAVAILABLE = "dependency_unavailable"
    SERVICE_UNAVAILABLE = "service_unavailable"
    RATE_LIMIT_UNAVAILABLE = "rate_limit_unavailable"
    # agents (MCP approvals)
    AGENT_APPROVAL_REQUIRED = "agent.approval_required"
    AGENT_APPROVAL_INVALID = "agent.approval_invalid"
    AGENT_APPROVAL_EXPIRED = "agent.approval_expired"
    AGENT_APPROVAL_USED = "agent.approval_used"
    AGENT_APPROVAL_NOT_NEEDED = "agent.approval_not_needed"
    AGENT_APPROVER_IS_AGENT = "agent.approver_is_agent"
    AGENT_HIGH_RISK_NO_ALWAYS = "agent.high_risk_no_always"
