"""The operator page (``[server.admin]``): its routes, template and static files."""
