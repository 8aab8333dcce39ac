"""``rmq-adapter console``: a small web console over the operating commands.

Plays the part of rocketmq-dashboard: an overview of workers, proxies, topics and consumer lag;
pending and parked transactions (resume); delay levels' backlog and lateness; message search and
a message's lifecycle; consumer groups' lag and offset reset (plan, then execute); dead letters
(browse, resend). Every page calls the cores ``rmq-adapter`` itself runs (:mod:`adapter.ops`,
:mod:`adapter.transaction.admin`): there is no second implementation here.

Its modules: ``config`` (listen address, the rule that a bind beyond loopback needs auth),
``auth`` (a token or a users file, and CSRF tokens), ``forms`` (request parsing), ``pages``
(each page's data from the ops cores), ``proxies`` (the proxies given with ``--proxy``, read
from their own probes), ``views`` (Jinja2 templates, shipped as package data),
``app`` (the WSGI application: routes, auth, CSRF) and ``server`` (the HTTP server).

Known gaps: the proxies are listed by hand (``--proxy``; they keep nothing in Kafka to find
them by); pages are rendered on request, with no caching.
"""
