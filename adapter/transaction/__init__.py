"""Transactional messages: RocketMQ's half messages, decisions and check-backs, on Kafka.

The producer's side: ``producer`` (``TransactionMQProducer``: half message, local transaction,
decision), ``half_record`` (a half message checked, and its record), ``group_commit`` (the fast
path: many decisions per Kafka transaction), ``direct_commit`` (a COMMIT as one append, to a
topic ``fences`` finds bounded in time), ``timing`` (the fast path's timing contract, which the
coordinator keeps too), ``checks`` (answering the coordinator's check requests;
``check_backlog`` says which need no answer) and ``envelope`` (the records they write).

The coordinator, a pure core: ``half`` (what it knows of a half message, and the one
validation of one), ``half_state`` (its moves), ``state`` (one partition's decisions, checks and
recovery), ``waiting`` (decisions read before their half message), ``read_mark`` (the gate
before a check), ``direct`` (when a COMMIT of a direct commit's message may be applied, and
why that is exactly once), ``actions`` (what the state asks for) and ``turn`` (one Kafka
transaction's work). Its Kafka shell: ``coordinator`` (the ``rmq-adapter worker transactions``
process; its settings and the check policy in ``config``), ``direct_search`` (is a message in
its queue already?), ``effects`` (the records each action writes) and ``metrics``.

The operator's side: ``admin`` (``transactions list`` and ``resume``) and ``admin_view`` (what
``list`` prints).
"""
