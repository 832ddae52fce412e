"""The broker edge: the wire protocol (``protocol``) and the only module that talks aio-pika (``amqp``)."""
