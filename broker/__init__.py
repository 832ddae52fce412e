"""The broker edge: the wire protocol (``protocol``) and the one module that talks aio-pika."""
